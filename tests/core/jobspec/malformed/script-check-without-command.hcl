job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      service {
        name = "web"
        check {
          type     = "script"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}
