job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      periodic {
        cron = "*/5 * * * *"
      }
    }
  }
}
