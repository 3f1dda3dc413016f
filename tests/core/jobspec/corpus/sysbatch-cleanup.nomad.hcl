# Run once on every client: sysbatch with the exec driver.
job "docker-cleanup" {
  datacenters = ["*"]
  type        = "sysbatch"

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  group "cleanup" {
    task "prune" {
      driver = "exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo pruning on ${node.unique.name}"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
