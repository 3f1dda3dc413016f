# busybox httpd in an App Container image run by rkt: it serves a page on a
# dynamic port of the host until Ctrl-C, and leaves no pod behind (`rkt list`).
# Needs root, rkt and its fly stage1 (herder's configuration names it):
#
#   examples/rkt/build-busybox-aci.sh /tmp/busybox.aci
#   rkt fetch --insecure-options=image /tmp/busybox.aci
#   cat > herder.toml <<'TOML'
#   [plugin.rkt]
#   stage1_path    = "/path/to/stage1-fly.aci"
#   allow_insecure = true        # the image is not signed: insecure_options = ["image"] below
#   TOML
#   sudo .venv/bin/herder run --config herder.toml examples/rkt/web.hcl
#   curl http://127.0.0.1:<port>/           (herder prints "port http is 127.0.0.1:<port>")
#
# The fly stage1 is a chroot: the pod shares the host's network, so the app
# binds its NOMAD_PORT_http on the host itself (net = ["host"] says so; with an
# isolating stage1, port_map { http = "http" } would map the image's port instead).
job "rkt-web" {
  group "web" {
    task "httpd" {
      driver = "rkt"

      config {
        image            = "example.local/busybox:1.0.0"
        insecure_options = ["image"]
        net              = ["host"]
        command          = "/bin/sh"
        # sh is the app's main process and exits on SIGTERM (rkt stop's signal), taking httpd along.
        args = ["-c", "echo \"hello from ${NOMAD_ALLOC_NAME}\" > /local/index.html; trap 'exit 0' INT TERM; httpd -f -p ${NOMAD_PORT_http} -h /local & wait"]
      }

      resources {
        cpu    = 100
        memory = 32
        network {
          port "http" {}
        }
      }

      kill_timeout = "3s"
    }
  }
}
