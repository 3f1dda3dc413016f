job "web" {
  group "app" {
    task "setup" {
      driver = "raw_exec"
      lifecycle {
        hook = "prestart"
      }
    }
  }
}
