# Provisioning files written inline with heredocs, one with quotes and an escaped interpolation.
job "grafana" {
  datacenters = ["dc1"]

  group "grafana" {
    network {
      port "http" {
        to = 3000
      }
    }

    task "grafana" {
      driver = "docker"

      config {
        image = "grafana/grafana:10.2.0"
        ports = ["http"]
        volumes = [
          "local/datasources:/etc/grafana/provisioning/datasources",
        ]
      }

      env {
        GF_SERVER_HTTP_PORT = "3000"
        GF_LOG_LEVEL        = "info"
      }

      template {
        data        = <<-EOH
          apiVersion: 1
          datasources:
            - name: "Prometheus"
              type: prometheus
              access: proxy
              url: "http://{{ env "NOMAD_IP_http" }}:9090"
              jsonData:
                httpMethod: "POST"
                # shell-style text left for the runtime
                note: "$${HOME}"
        EOH
        destination = "local/datasources/prometheus.yaml"
      }

      resources {
        cpu    = 200
        memory = 256
      }
    }
  }
}
