job "a" {
  group "app" {
    task "server" {
      driver = "raw_exec"
    }
  }
}

job "b" {
  group "app" {
    task "server" {
      driver = "raw_exec"
    }
  }
}
