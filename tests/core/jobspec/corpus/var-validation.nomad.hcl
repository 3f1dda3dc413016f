# Variables with validation rules and descriptions.
variable "image" {
  type        = string
  description = "the image to run"
  default     = "nginx:1.25"

  validation {
    condition     = length(split(":", var.image)) == 2
    error_message = "The image needs a tag."
  }
}

variable "count" {
  type    = number
  default = 2
  validation {
    condition     = var.count > 0 && var.count < 10
    error_message = "Between 1 and 9 instances."
  }
}

job "validated" {
  datacenters = ["dc1"]

  group "web" {
    count = var.count

    task "web" {
      driver = "docker"
      config {
        image = var.image
      }
    }
  }
}
