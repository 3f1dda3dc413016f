# A script written by a template and run by raw_exec, with a shell default in it.
job "script" {
  datacenters = ["dc1"]
  type        = "batch"

  group "run" {
    task "run" {
      driver = "raw_exec"

      template {
        destination = "local/run.sh"
        perms       = "0755"
        data        = <<EOT
#!/bin/sh
set -eu
echo "alloc $${NOMAD_ALLOC_ID:-none} on {{ env "node.unique.name" }}"
EOT
      }

      config {
        command = "local/run.sh"
      }
    }
  }
}
