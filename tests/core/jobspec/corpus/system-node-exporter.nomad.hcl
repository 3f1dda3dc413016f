# A system job running on every node with host networking and a static port.
job "node-exporter" {
  datacenters = ["dc1"]
  type        = "system"

  group "exporter" {
    network {
      port "metrics" {
        static = 9100
      }
    }

    task "exporter" {
      driver = "docker"

      config {
        image        = "prom/node-exporter:v1.7.0"
        network_mode = "host"
        pid_mode     = "host"
        args         = ["--path.rootfs=/host"]
        volumes      = ["/:/host:ro"]
      }

      service {
        name = "node-exporter"
        port = "metrics"
        check {
          type     = "http"
          path     = "/metrics"
          interval = "30s"
          timeout  = "5s"
        }
      }
    }
  }
}
