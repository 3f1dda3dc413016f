# A mesh gateway group and a service that uses it.
job "mesh-gateway" {
  datacenters = ["dc1"]

  group "mesh" {
    network {
      mode = "bridge"
      port "mesh_wan" {
        static = 443
      }
    }

    service {
      name = "mesh-gateway"
      port = "mesh_wan"

      connect {
        gateway {
          mesh {}
        }
      }
    }
  }

  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = "/usr/local/bin/app"
      }
    }
  }
}
