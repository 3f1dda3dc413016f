# exec sharing the host's PID and IPC namespaces (the node must allow it).
job "exec-host-ns" {
  datacenters = ["dc1"]
  type        = "system"

  group "monitor" {
    task "monitor" {
      driver = "exec"

      config {
        command  = "/bin/sh"
        args     = ["-c", "while true; do ps; sleep 60; done"]
        pid_mode = "host"
        ipc_mode = "host"
      }
    }
  }
}
