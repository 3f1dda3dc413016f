job "web" {
  group "app" {
    restart {
      attempts = 0
      interval = "2s"
    }
    task "server" {
      driver = "raw_exec"
    }
  }
}
