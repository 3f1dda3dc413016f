# A nightly report: periodic batch job with a cron spec and no overlap.
job "nightly-report" {
  datacenters = ["dc1"]
  type        = "batch"

  periodic {
    crons            = ["0 3 * * *"]
    prohibit_overlap = true
    time_zone        = "Europe/Berlin"
  }

  group "report" {
    restart {
      attempts = 1
      delay    = "30s"
      mode     = "fail"
    }

    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "generate" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "date; echo report for ${NOMAD_JOB_ID} > ${NOMAD_ALLOC_DIR}/report.txt"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
