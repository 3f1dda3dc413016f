# Edge workloads: node pools, disconnect handling, max_run_duration-era keys.
job "edge-agent" {
  datacenters = ["edge-*"]
  node_pool   = "edge"
  type        = "service"

  group "agent" {
    disconnect {
      lost_after = "1h"
      replace    = false
      reconcile  = "keep_original"
    }

    prevent_reschedule_on_lost = true

    task "agent" {
      driver = "exec"

      config {
        command = "/usr/local/bin/agent"
        args    = ["--node", "${node.unique.name}"]
      }

      resources {
        cpu        = 100
        memory     = 64
        memory_max = 128
      }
    }
  }
}
