# exec with the default namespaces written out.
job "exec-private" {
  datacenters = ["dc1"]
  type        = "batch"

  group "job" {
    task "job" {
      driver = "exec"

      config {
        command  = "/bin/echo"
        args     = ["done"]
        pid_mode = "private"
        ipc_mode = "private"
        work_dir = "/tmp"
      }
    }
  }
}
