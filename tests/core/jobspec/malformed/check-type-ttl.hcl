job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      service {
        name = "web"
        check {
          type     = "ttl"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}
