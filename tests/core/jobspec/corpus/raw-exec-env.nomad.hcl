# A host binary with its environment built from node attributes and metadata.
job "node-exporter" {
  datacenters = ["dc1"]
  type        = "system"

  group "exporter" {
    network {
      port "metrics" {
        static = 9100
      }
    }

    task "node-exporter" {
      driver = "raw_exec"
      user   = "nobody"

      config {
        command = "/usr/local/bin/node_exporter"
        args = [
          "--web.listen-address=${NOMAD_ADDR_metrics}",
          "--collector.textfile.directory=${NOMAD_TASK_DIR}/textfile",
        ]
      }

      env {
        HOST_IP   = "${attr.unique.network.ip-address}"
        RACK      = "${meta.rack}"
        NODE_NAME = "${node.unique.name}"
      }

      service {
        name     = "node-exporter"
        port     = "metrics"
        provider = "nomad"
        tags     = ["prometheus"]
      }

      kill_timeout = "10s"

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
