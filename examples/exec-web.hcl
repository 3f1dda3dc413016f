# The host's busybox httpd, isolated by the exec driver (runc): it runs as
# nobody, sees the host's system directories read-only and its own /local,
# and serves /local on a dynamic port of the host until Ctrl-C, leaving no
# container behind (`runc list`). Needs root and runc; the Debian package
# busybox-static provides /bin/busybox.
#
#   sudo .venv/bin/herder run examples/exec-web.hcl
#   curl http://127.0.0.1:<port>/           (herder prints "port http is 127.0.0.1:<port>")
job "exec-web" {
  group "web" {
    task "httpd" {
      driver = "exec"

      config {
        command = "/bin/sh"
        # sh is the container's init and exits on Ctrl-C's SIGINT, which ends the whole
        # container (a bare httpd as init would ignore it and be killed after kill_timeout).
        args = ["-c", "echo \"hello from $(id -un) in ${NOMAD_ALLOC_NAME}\" > /local/index.html; trap 'exit 0' INT TERM; /bin/busybox httpd -f -p ${NOMAD_PORT_http} -h /local & wait"]
      }

      resources {
        cpu    = 100
        memory = 32
        network {
          port "http" {}
        }
      }
    }
  }
}
