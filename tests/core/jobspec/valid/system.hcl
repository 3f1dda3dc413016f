job "node-agent" {
  datacenters = ["*"]
  type        = "system"
  node_pool   = "all"

  group "agent" {
    task "agent" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
    }
  }
}
