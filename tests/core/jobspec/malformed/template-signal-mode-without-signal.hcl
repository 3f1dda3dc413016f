job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      template {
        data        = "x"
        destination = "local/x"
        change_mode = "signal"
      }
    }
  }
}
