job "web" {
  group "app" {
    task "first" {
      driver = "raw_exec"
      resources {
        memory = 64
      }
    }

    task "second" {
      driver = "raw_exec"
      resources {
        cpu    = 100
        memory = "lots"
      }
    }
  }
}
