job "web" {
  group "app" {
    task "server" {
      driver = "docker"
      resources {
        memory     = 256
        memory_max = 100
      }
    }
  }
}
