# A batch task through herder's raw_exec driver: read its output with `nomad alloc logs`.
job "herder-hello" {
  datacenters = ["dc1"]
  type        = "batch"

  group "hello" {
    task "hello" {
      driver = "herder"

      config {
        driver = "raw_exec"
        config = {
          command = "/bin/sh"
          args    = ["-c", "echo hello from $NOMAD_TASK_NAME, allocation $HERDER_ALLOC_NAME"]
        }
      }
    }
  }
}
