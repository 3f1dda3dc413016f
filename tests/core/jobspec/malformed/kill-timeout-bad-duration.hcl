job "web" {
  group "app" {
    task "server" {
      driver       = "raw_exec"
      kill_timeout = "10x"
    }
  }
}
