# A constraint made by a dynamic block (dropped with a warning) and dynamic artifacts.
variable "binaries" {
  default = ["https://releases.example.com/app/1.0/app", "https://releases.example.com/app/1.0/plugin"]
}

job "dynamic-artifacts" {
  datacenters = ["dc1"]

  dynamic "constraint" {
    for_each = ["linux"]
    content {
      attribute = "$${attr.kernel.name}"
      value     = constraint.value
    }
  }

  group "app" {
    task "app" {
      driver = "exec"

      config {
        command = "local/app"
      }

      dynamic "artifact" {
        for_each = var.binaries
        content {
          source      = artifact.value
          destination = "local/"
        }
      }
    }
  }
}
