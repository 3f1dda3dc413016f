job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
    }
    task "server" {
      driver = "raw_exec"
    }
  }
}
