# Two tasks in one network namespace (bridge mode): a web server that listens on 8080 inside the
# allocation, and a sidecar that reaches it on 127.0.0.1. Only the mapped host port reaches it from
# outside. Needs root and the CNI plugins (Debian: containernetworking-plugins); see docs/networking.md.
#
#   sudo herder run examples/bridge-web.hcl
#   curl http://127.0.0.1:<port>/      (the host port herder prints: NOMAD_HOST_PORT_http)
job "bridge-web" {
  group "app" {
    network {
      mode = "bridge"
      port "http" {
        to = 8080
      }
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "python3"
        args    = ["-m", "http.server", "${NOMAD_PORT_http}"]
      }

      kill_timeout = "3s"
    }

    task "probe" {
      driver = "raw_exec"

      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "while sleep 10; do curl -s -o /dev/null -w 'server on 127.0.0.1:8080: %%{http_code}\\n' http://127.0.0.1:8080/; done"]
      }
    }
  }
}
