# A periodic job: a nightly backup of two files of /etc, at 03:00 in the host's time zone.
# The agent registers it and launches a child job, nightly/periodic-<unix seconds>, at each
# launch time; see docs/scheduling.md.
#
#   herder agent --config examples/agent.toml          # in another terminal
#   herder job run examples/nightly.hcl                # registered: shows the next launch
#   herder job periodic force nightly                  # one backup now, not at 03:00
#   herder job status nightly                          # the next launch and the children
#   herder job stop nightly                            # no more launches
#
# `herder run examples/nightly.hcl` follows the schedule in the foreground instead, until Ctrl-C.
job "nightly" {
  type = "batch"

  periodic {
    crons            = ["0 3 * * *"]
    time_zone        = "Local"
    prohibit_overlap = true # a backup still running at the next launch time: that launch is skipped
  }

  group "backup" {
    task "tar" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          archive="$NOMAD_ALLOC_DIR/data/etc-$(date +%Y%m%d-%H%M%S).tar.gz"
          tar -czf "$archive" -C /etc hostname hosts
          echo "$NOMAD_JOB_ID (launched by $NOMAD_JOB_PARENT_ID) wrote $archive"
        EOT
        ]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
