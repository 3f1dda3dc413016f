job "web" {
  group "app" {
    task "a" {
      driver = "raw_exec"
      leader = true
    }
    task "b" {
      driver = "raw_exec"
      leader = true
    }
  }
}
