# The node half of a CSI plugin: a privileged system job registering the plugin.
job "plugin-aws-ebs-nodes" {
  datacenters = ["dc1"]
  type        = "system"

  group "nodes" {
    task "plugin" {
      driver = "docker"

      config {
        image      = "amazon/aws-ebs-csi-driver:v1.25.0"
        args       = ["node", "--endpoint=unix://csi/csi.sock", "--logtostderr", "--v=5"]
        privileged = true
      }

      csi_plugin {
        id        = "aws-ebs0"
        type      = "node"
        mount_dir = "/csi"
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
