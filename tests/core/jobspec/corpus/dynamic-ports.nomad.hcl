# Ports generated from a variable with a dynamic block.
variable "ports" {
  type    = list(string)
  default = ["http", "metrics"]
}

job "dynamic" {
  datacenters = ["dc1"]

  group "app" {
    network {
      dynamic "port" {
        for_each = var.ports
        labels   = [port.value]
        content {}
      }
    }

    task "app" {
      driver = "raw_exec"

      config {
        command = "/usr/local/bin/app"
        args    = [for p in var.ports : "--${p}-port=$${NOMAD_PORT_${p}}"]
      }
    }
  }
}
