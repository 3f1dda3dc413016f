# Task lifecycle, as in Nomad 1.x.
#
# "init" (prestart) prepares a file and must complete before anything else
# starts; "proxy" (a prestart sidecar) must be running before "app" starts and
# is killed once "app" is dead (Main Tasks Dead); "report" (poststop) runs
# after every other task is dead.
job "lifecycle" {
  type = "batch"

  group "app" {
    task "init" {
      driver = "raw_exec"
      lifecycle {
        hook = "prestart"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo prepared > ${NOMAD_ALLOC_DIR}/data/ready"]
      }
    }

    task "proxy" {
      driver = "raw_exec"
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do date >> ${NOMAD_ALLOC_DIR}/data/proxy.log; sleep 1; done"]
      }
    }

    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "cat ${NOMAD_ALLOC_DIR}/data/ready && sleep 3 && echo done"]
      }
    }

    task "report" {
      driver = "raw_exec"
      lifecycle {
        hook = "poststop"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo proxy logged $(wc -l < ${NOMAD_ALLOC_DIR}/data/proxy.log) lines"]
      }
    }
  }
}
