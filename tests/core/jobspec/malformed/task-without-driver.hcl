job "web" {
  group "app" {
    task "server" {
      config {
        command = "/bin/true"
      }
    }
  }
}
