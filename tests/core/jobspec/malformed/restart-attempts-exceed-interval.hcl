job "web" {
  group "app" {
    restart {
      attempts = 10
      delay    = "15s"
      interval = "1m"
    }
    task "server" {
      driver = "raw_exec"
    }
  }
}
