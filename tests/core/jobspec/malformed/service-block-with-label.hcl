job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      service "web" {
        port = 80
      }
    }
  }
}
