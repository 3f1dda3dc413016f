job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      resources {
        network {
          port "http" {}
        }
      }
      service {
        name = "web"
        port = "http"
        check {
          type     = "http"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}
