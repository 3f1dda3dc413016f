# Constraints, affinities and spread across racks.
job "placement" {
  datacenters = ["us-east-1", "us-west-1"]
  region      = "global"
  priority    = 70

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  constraint {
    operator = "distinct_hosts"
    value    = "true"
  }

  affinity {
    attribute = "${node.datacenter}"
    value     = "us-west-1"
    weight    = 100
  }

  spread {
    attribute = "${meta.rack}"
    weight    = 100

    target "r1" {
      percent = 60
    }

    target "r2" {
      percent = 40
    }
  }

  group "app" {
    count = 5

    task "app" {
      driver = "docker"

      config {
        image = "hashicorp/http-echo"
        args  = ["-text", "hello"]
      }

      constraint {
        attribute = "${attr.cpu.arch}"
        value     = "amd64"
      }
    }
  }
}
