# A parameterized job: a conversion template, run once per dispatch with its
# arguments. Against the example agent (examples/agent.toml):
#
#   herder agent --config examples/agent.toml
#   herder job run examples/convert.hcl          # registered, not run
#   echo '{"width": 640}' | herder job dispatch -meta input=photo.png -meta format=webp convert -
#   herder job status                             # convert, and its child convert/dispatch-...
#   herder alloc logs <alloc id> convert
#
# Or, without an agent, dispatched once in the foreground:
#
#   echo '{"width": 640}' | herder run examples/convert.hcl --meta input=photo.png --payload -
job "convert" {
  type = "batch"

  parameterized {
    payload       = "optional"        # optional | required | forbidden; at most 16 KiB
    meta_required = ["input"]
    meta_optional = ["format"]
  }

  meta {
    format = "png"                    # a dispatch's meta wins over the job's
  }

  group "convert" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    task "convert" {
      driver = "raw_exec"

      # The payload, when a dispatch gives one, is written to local/options.json.
      dispatch_payload {
        file = "options.json"
      }

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOS
          echo "converting $NOMAD_META_input to $NOMAD_META_format (job $NOMAD_JOB_NAME)"
          if [ -f "$NOMAD_TASK_DIR/options.json" ]; then
            echo "options: $(cat "$NOMAD_TASK_DIR/options.json")"
          else
            echo "no options given"
          fi
          EOS
        ]
      }

      resources {
        cpu    = 100
        memory = 32
      }
    }
  }
}
