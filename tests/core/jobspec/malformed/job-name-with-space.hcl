job "my web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
    }
  }
}
