job "web" {
  type = "cron"
  group "app" {
    count = "two"
    task "server" {
      driver = "raw_exec"
      resources {
        memory = true
      }
      logs {
        max_files = 0
      }
    }
  }
}
