job "web" {
  group "app" {
    task "setup" {
      driver = "raw_exec"
      lifecycle {
        hook = "prerun"
      }
    }
    task "main" {
      driver = "raw_exec"
    }
  }
}
