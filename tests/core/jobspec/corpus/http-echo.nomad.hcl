# The getting-started http-echo service, with a port chosen by the client.
job "http-echo" {
  datacenters = ["dc1"]

  group "echo" {
    count = 2

    network {
      port "http" {}
    }

    task "server" {
      driver = "docker"

      config {
        image = "hashicorp/http-echo:latest"
        args = [
          "-listen", ":${NOMAD_PORT_http}",
          "-text", "Hello and welcome to ${NOMAD_IP_http} running on port ${NOMAD_PORT_http}",
        ]
        ports = ["http"]
      }

      service {
        name = "http-echo"
        port = "http"
        tags = ["urlprefix-/http-echo"]

        check {
          type     = "http"
          path     = "/health"
          interval = "2s"
          timeout  = "2s"
        }
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
