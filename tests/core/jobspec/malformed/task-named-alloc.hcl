job "web" {
  group "app" {
    task "alloc" {
      driver = "raw_exec"
      config {
        command = "true"
      }
    }
  }
}
