# Nomad 0.6-era syntax: resources with a network block and mbits, port_map in config.
job "binstore-storagelocker" {
  region      = "global"
  type        = "service"
  priority    = 50
  all_at_once = true
  datacenters = ["us2", "eu1"]

  meta {
    foo = "bar"
  }

  group "binsl" {
    count = 5

    task "binstore" {
      driver = "docker"

      config {
        image = "hashicorp/binstore"
        port_map {
          http  = 80
          admin = 8080
        }
      }

      env {
        HELLO = "world"
        LOREM = "ipsum"
      }

      resources {
        cpu    = 500
        memory = 128

        network {
          mbits = "100"
          port "one" {
            static = 1
          }
          port "two" {
            static = 2
          }
          port "three" {
            static = 3
          }
          port "http" {}
          port "admin" {}
        }
      }

      kill_timeout = "22s"
    }
  }
}
