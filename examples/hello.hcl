# A batch job: one task that prints a greeting built from its environment.
#
#   herder run --logs examples/hello.hcl
job "hello" {
  type = "batch"

  group "greeter" {
    task "hello" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"$GREETING from task $NOMAD_TASK_NAME of $NOMAD_ALLOC_NAME\""]
      }

      env {
        GREETING = "Hello, ${NOMAD_JOB_NAME}"
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
