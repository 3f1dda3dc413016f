# exec with capabilities dropped and one added, and a working directory.
job "exec-caps" {
  datacenters = ["dc1"]

  group "ping" {
    task "ping" {
      driver = "exec"
      user   = "root"

      config {
        command  = "/bin/ping"
        args     = ["-c", "1", "127.0.0.1"]
        cap_drop = ["all"]
        cap_add  = ["net_raw"]
        work_dir = "/local"
      }
    }
  }
}
