job "web" {
  group "app" {
    task "a" {
      driver = "raw_exec"
    }
  }
  group "app" {
    task "b" {
      driver = "raw_exec"
    }
  }
}
