# Locals computed with HCL2 functions, used across the job.
variable "env" {
  default = "Staging"
}

variable "replicas" {
  type    = number
  default = 2
}

locals {
  name      = "web-${lower(var.env)}"
  tags      = concat(["web"], [lower(var.env)])
  ports     = { http = 8080, metrics = 9100 }
  image_tag = format("%s-%03d", "release", 7)
}

job "web" {
  datacenters = ["dc1"]
  meta {
    environment = local.name
    tag         = local.image_tag
  }

  group "web" {
    count = var.replicas * 2

    network {
      port "http" {
        to = local.ports.http
      }
      port "metrics" {
        to = local.ports["metrics"]
      }
    }

    task "web" {
      driver = "docker"

      config {
        image = "nginx:${local.image_tag}"
        ports = keys(local.ports)
      }

      service {
        name = local.name
        tags = local.tags
        port = "http"
      }
    }
  }
}
