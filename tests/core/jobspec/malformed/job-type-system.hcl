job "web" {
  type = "system"
  group "app" {
    task "server" {
      driver = "raw_exec"
    }
  }
}
