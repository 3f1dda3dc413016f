# A poststop task that cleans up after the main task.
job "cleanup" {
  datacenters = ["dc1"]
  type        = "batch"

  group "work" {
    task "work" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo data > ${NOMAD_ALLOC_DIR}/data/out"]
      }
    }

    task "cleanup" {
      driver = "raw_exec"
      lifecycle {
        hook = "poststop"
      }
      config {
        command = "/bin/rm"
        args    = ["-f", "${NOMAD_ALLOC_DIR}/data/out"]
      }
    }
  }
}
