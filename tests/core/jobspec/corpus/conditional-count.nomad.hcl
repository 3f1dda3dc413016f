# Conditionals choosing counts and resources by environment.
variable "production" {
  type    = bool
  default = false
}

job "api" {
  datacenters = ["dc1"]

  group "api" {
    count = var.production ? 3 : 1

    task "api" {
      driver = "docker"

      config {
        image = "example/api:1.2"
      }

      resources {
        cpu    = var.production ? 1000 : 250
        memory = var.production ? 1024 : 256
      }
    }
  }
}
