# Download a program, check it, unpack it, configure it, run it: artifact and
# template, in Nomad's job syntax (this file runs unchanged under Nomad 1.x).
#
#   python3 -m http.server 8765 --bind 127.0.0.1 --directory examples/artifact-web &
#   herder run examples/artifact-web/job.nomad
#   curl http://127.0.0.1:<port>/      (the port herder prints for "http")
#
# Serving from elsewhere: herder run --var artifact_server=http://host:port job.nomad
variable "artifact_server" {
  type    = string
  default = "http://127.0.0.1:8765"
}

job "artifact-web" {
  datacenters = ["dc1"]

  group "web" {
    network {
      port "http" {}
    }

    task "greeter" {
      driver = "raw_exec"

      artifact {
        source      = "${var.artifact_server}/app.tar.gz"
        destination = "local/app"
        options {
          checksum = "sha256:2039c00361b28bb6a04a815815a2a2d61eff7b85e6c578ebf8e910f48e0f6b72"
        }
      }

      template {
        data        = <<EOT
port={{ env "NOMAD_PORT_http" }}
greeting=Hello from {{ env "NOMAD_TASK_NAME" }} of {{ env "NOMAD_JOB_NAME" | toUpper }}
EOT
        destination = "local/app.conf"
        change_mode = "restart"
      }

      config {
        command = "local/app/bin/web"
        args    = ["local/app.conf"]
      }

      resources {
        cpu    = 100
        memory = 64
      }

      kill_timeout = "3s"
    }
  }
}
