# A leader with a sidecar and a restart policy.
#
# "worker" is the leader: it does three rounds of work and exits; the
# "heartbeat" sidecar runs until the leader is dead, then herder kills it
# (Leader Task Dead). "flaky" fails once and is restarted under the group's
# restart policy.
job "pipeline" {
  type = "batch"

  group "work" {
    restart {
      attempts = 2
      interval = "1m"
      delay    = "1s"
      mode     = "fail"
    }

    task "worker" {
      driver = "raw_exec"
      leader = true
      config {
        command = "/bin/sh"
        args    = ["-c", "for i in 1 2 3; do echo round $i; sleep 1; done"]
      }
    }

    task "heartbeat" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do echo alive; sleep 1; done"]
      }
      kill_signal  = "SIGTERM"
      kill_timeout = "2s"
    }

    task "flaky" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "if [ -e \"$NOMAD_ALLOC_DIR/data/ran\" ]; then echo second try; else touch \"$NOMAD_ALLOC_DIR/data/ran\"; exit 3; fi"]
      }
    }
  }
}
