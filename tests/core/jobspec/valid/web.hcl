# One job in three formats: web.hcl, web.json and web.yaml load to equal jobs.
job "web" {
  datacenters = ["dc1", "dc2"]
  region      = "europe"
  meta {
    team = "platform"
  }

  group "app" {
    count = 2

    restart {
      attempts = 5
      delay    = "10s"
    }

    network {
      port "metrics" {}
    }

    task "server" {
      driver = "docker"
      leader = true

      config {
        image = "herder-test/busybox:1"
        args  = ["httpd", "-f", "-p", "${NOMAD_PORT_http}"]
        port_map {
          http = 8080
        }
        labels {
          tier = "front"
        }
      }

      env {
        GREETING = "hello"
        WORKERS  = 4
      }

      kill_timeout   = "10s"
      kill_signal    = "SIGTERM"
      shutdown_delay = "1.5s"

      resources {
        cpu    = 250
        memory = 128
        network {
          port "http" {}
          port "admin" {
            static = 8081
          }
          port "db" {
            to = 5432
          }
        }
      }

      service {
        name = "web"
        port = "http"
        tags = ["v1", "front"]
        check {
          type     = "http"
          path     = "/health"
          interval = "10s"
          timeout  = "2s"
        }
        check {
          type     = "script"
          command  = "/bin/sh"
          args     = ["-c", "test -f /local/ready"]
          interval = "5s"
          timeout  = "1s"
          check_restart {
            limit = 3
            grace = "10s"
          }
        }
      }

      service {
        name         = "admin"
        port         = "admin"
        address_mode = "host"
      }

      artifact {
        source      = "https://example.com/app.tar.gz"
        destination = "local/app"
        options {
          checksum = "sha256:abababababababababababababababababababababababababababababababab"
        }
      }

      template {
        data        = "port={{ env \"NOMAD_PORT_http\" }}"
        destination = "local/app.conf"
        change_mode = "signal"
        change_signal = "SIGHUP"
      }

      logs {
        max_files     = 3
        max_file_size = 5
      }
    }

    task "sidecar" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      restart {
        attempts = 1
      }
    }
  }
}
