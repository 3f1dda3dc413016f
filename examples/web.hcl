# A service: Python's HTTP server on a dynamic port, until Ctrl-C.
#
#   herder run examples/web.hcl
#   curl http://127.0.0.1:<port>/      (the port is in the task's NOMAD_PORT_http)
job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"

      config {
        command = "python3"
        args    = ["-m", "http.server", "--bind", "${NOMAD_IP_http}", "${NOMAD_PORT_http}"]
      }

      resources {
        memory = 64
        network {
          port "http" {}
        }
      }

      service {
        name = "web"
        port = "http"
        check {
          type     = "http"
          path     = "/"
          interval = "10s"
          timeout  = "2s"
        }
      }

      kill_timeout = "3s"
    }
  }
}
