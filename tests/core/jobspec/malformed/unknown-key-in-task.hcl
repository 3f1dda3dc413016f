job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      colour = "red"
    }
  }
}
