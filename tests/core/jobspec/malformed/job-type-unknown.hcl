job "web" {
  type = "daemon"
  group "app" {
    task "server" {
      driver = "raw_exec"
    }
  }
}
