# Memory oversubscription without a hard limit (memory_max = -1).
job "oversubscribed" {
  datacenters = ["dc1"]

  group "cache" {
    task "memcached" {
      driver = "docker"

      config {
        image = "memcached:1.6"
      }

      resources {
        cpu        = 500
        memory     = 256
        memory_max = -1
      }
    }
  }
}
