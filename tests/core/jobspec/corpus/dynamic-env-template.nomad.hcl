# Templates generated from a map of file names to contents.
variable "files" {
  type = map(string)
  default = {
    "app.conf"  = "mode=production"
    "log.conf"  = "level=info"
  }
}

job "dynamic-templates" {
  datacenters = ["dc1"]
  type        = "batch"

  group "render" {
    task "render" {
      driver = "raw_exec"

      config {
        command = "/bin/ls"
        args    = ["local"]
      }

      dynamic "template" {
        for_each = var.files
        labels   = []

        content {
          data        = template.value
          destination = "local/${template.key}"
        }
      }
    }
  }
}
