# A terminating gateway in front of an external database, beside its client.
job "countdash-terminating" {
  datacenters = ["dc1"]

  group "gateway" {
    network {
      mode = "bridge"
    }

    service {
      name = "api-gateway"

      connect {
        gateway {
          proxy {}
          terminating {
            service {
              name = "count-api"
            }
          }
        }
      }
    }
  }

  group "dashboard" {
    network {
      port "http" {
        static = 9002
      }
    }

    task "dashboard" {
      driver = "docker"

      env {
        COUNTING_SERVICE_URL = "http://localhost:8080"
      }

      config {
        image = "hashicorpdev/counter-dashboard:v3"
      }
    }
  }
}
