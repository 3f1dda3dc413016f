# A service with two health checks: an http check herder (or Consul) runs
# against the port, and a script check run inside the task through the
# driver's exec. The live table shows each check's health.
#
#   herder run examples/web-checked.hcl
#   herder run --config consul.toml examples/web-checked.hcl   # with [services] backend = "consul"
job "web-checked" {
  group "app" {
    task "server" {
      driver = "raw_exec"

      config {
        command = "python3"
        args    = ["-m", "http.server", "--bind", "${NOMAD_IP_http}", "${NOMAD_PORT_http}",
                   "--directory", "${NOMAD_TASK_DIR}"]
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
        tags = ["example", "${NOMAD_ALLOC_INDEX}"]

        check {
          name     = "index"
          type     = "http"
          path     = "/"
          interval = "2s"
          timeout  = "1s"
        }

        check {
          name     = "alive"
          type     = "script"
          command  = "/bin/sh"
          args     = ["-c", "test -d \"$NOMAD_TASK_DIR\" && echo task dir present"]
          interval = "3s"
          timeout  = "2s"

          check_restart {
            limit = 3
            grace = "5s"
          }
        }
      }

      kill_timeout = "3s"
    }
  }
}
