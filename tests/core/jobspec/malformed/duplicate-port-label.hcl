job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      resources {
        network {
          port "http" {}
          port "http" {
            static = 8080
          }
        }
      }
    }
  }
}
