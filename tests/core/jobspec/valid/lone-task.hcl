# A task directly under the job forms a group of the same name, as in Nomad;
# variables make it configurable: herder run --var image=... lone-task.hcl
variable "image" {
  type    = string
  default = "herder-test/busybox:1"
}

variable "memory" {
  default = 64
}

job "lone" {
  type = "batch"

  task "once" {
    driver = "docker"
    config {
      image   = var.image
      command = "echo"
      args    = ["done in ${NOMAD_ALLOC_DIR}"]
    }
    resources {
      memory = var.memory
    }
  }
}
