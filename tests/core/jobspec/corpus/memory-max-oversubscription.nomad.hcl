# Memory oversubscription with a hard limit above the reservation.
job "oversub" {
  datacenters = ["dc1"]

  group "app" {
    task "app" {
      driver = "docker"

      config {
        image = "busybox:1.36"
        command = "sleep"
        args = ["3600"]
      }

      resources {
        memory     = 128
        memory_max = 512
      }
    }
  }
}
