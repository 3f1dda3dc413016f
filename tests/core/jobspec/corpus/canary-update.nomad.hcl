# Blue/green with canaries: update stanza with auto-promotion and auto-revert.
job "api" {
  datacenters = ["dc1"]

  update {
    max_parallel     = 2
    canary           = 2
    min_healthy_time = "30s"
    healthy_deadline = "5m"
    auto_revert      = true
    auto_promote     = true
    health_check     = "checks"
    stagger          = "30s"
  }

  group "api" {
    count = 2

    network {
      port "http" {
        to = 8080
      }
    }

    task "api" {
      driver = "docker"

      config {
        image = "example/api:2.0.0"
        ports = ["http"]
      }

      service {
        name = "api"
        port = "http"

        canary_tags = ["canary"]
        tags        = ["v2"]

        check {
          name     = "alive"
          type     = "http"
          path     = "/healthz"
          interval = "10s"
          timeout  = "2s"
        }
      }

      kill_timeout = "20s"
      kill_signal  = "SIGTERM"
    }
  }
}
