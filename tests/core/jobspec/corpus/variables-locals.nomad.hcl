# HCL2 variables, validation, locals and functions, as Nomad 1.x job files write them.
variable "datacenters" {
  description = "The datacenters to run in."
  type        = list(string)
  default     = ["dc1"]
}

variable "image_tag" {
  type    = string
  default = "1.25"
}

variable "replicas" {
  type    = number
  default = 2

  validation {
    condition     = var.replicas > 0 && var.replicas <= 10
    error_message = "Replicas must be between 1 and 10."
  }
}

variable "environment" {
  type    = string
  default = "staging"
}

variable "resources" {
  type = object({
    cpu    = number
    memory = number
  })
  default = {
    cpu    = 200
    memory = 256
  }
}

locals {
  name  = "web-${var.environment}"
  image = format("nginx:%s", var.image_tag)
}

locals {
  tags   = concat(["web", var.environment], var.environment == "prod" ? ["critical"] : [])
  labels = merge({ team = "platform" }, { env = upper(var.environment) })
}

job "web" {
  datacenters = var.datacenters
  namespace   = "default"

  meta {
    owner   = lookup(local.labels, "team", "unknown")
    release = join("-", [local.name, var.image_tag])
  }

  group "web" {
    count = var.replicas

    network {
      port "http" {
        to = 80
      }
    }

    service {
      name     = local.name
      port     = "http"
      tags     = local.tags
      provider = "nomad"
    }

    task "nginx" {
      driver = "docker"

      config {
        image  = local.image
        ports  = ["http"]
        labels = local.labels
      }

      resources {
        cpu    = var.resources.cpu
        memory = var.resources.memory
      }
    }
  }
}
