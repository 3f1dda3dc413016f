# A web server in a Docker container: busybox httpd serves a page on a dynamic
# host port, mapped to port 8080 inside the container, until Ctrl-C.
#
#   make busybox-image                      (once: builds herder-test/busybox:1, no registry needed)
#   herder run examples/docker-web.hcl
#   curl http://127.0.0.1:<port>/           (herder prints "port http is 127.0.0.1:<port>")
job "docker-web" {
  group "app" {
    task "server" {
      driver = "docker"

      config {
        image   = "herder-test/busybox:1"
        command = "sh"
        # sh stays PID 1 and exits on SIGTERM (a bare httpd as PID 1 would ignore it
        # and be killed only after kill_timeout).
        args    = ["-c", "echo hello from ${NOMAD_ALLOC_NAME} > /local/index.html; trap 'exit 0' TERM; httpd -f -p 8080 -h /local & wait"]

        port_map {
          http = 8080
        }
      }

      resources {
        memory = 32
        network {
          port "http" {}
        }
      }

      kill_timeout = "3s"
    }
  }
}
