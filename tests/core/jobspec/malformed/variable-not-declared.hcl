job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      config {
        command = "${var.command}"
      }
    }
  }
}
