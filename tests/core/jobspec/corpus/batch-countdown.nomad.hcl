# A batch job of several groups with different restart policies.
job "countdown" {
  datacenters = ["dc1"]
  type        = "batch"

  group "fast" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    task "count" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "for i in 3 2 1; do echo $i; done"]
      }
    }
  }

  group "retrying" {
    restart {
      attempts = 5
      delay    = "5s"
      interval = "1m"
      mode     = "delay"
    }

    task "flaky" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "test $((RANDOM % 2)) -eq 0"]
      }
    }
  }
}
