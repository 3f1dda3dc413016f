job "web" {
  group "app" {
    count = -1
    task "server" {
      driver = "raw_exec"
    }
  }
}
