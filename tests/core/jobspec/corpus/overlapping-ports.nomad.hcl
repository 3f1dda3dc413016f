# Nomad 0.6's jobspec fixture: port labels that differ only in case, refused.
job "foo" {
  group "bar" {
    task "bar" {
      driver = "docker"

      config {
        image = "redis:7"
      }

      resources {
        network {
          port "Http" {}
          port "http" {}
          port "HTTP" {}
        }
      }
    }
  }
}
