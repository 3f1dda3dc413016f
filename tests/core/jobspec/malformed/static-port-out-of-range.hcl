job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      resources {
        network {
          port "http" {
            static = 70000
          }
        }
      }
    }
  }
}
