# Docker mounts from a list of objects, with a written-out mount beside them.
variable "scratch" {
  type = list(object({ target = string, size = number }))
  default = [
    { target = "/cache", size = 64 },
    { target = "/spool", size = 32 },
  ]
}

job "mounts" {
  datacenters = ["dc1"]

  group "app" {
    task "app" {
      driver = "docker"

      config {
        image = "redis:7"

        mount {
          type     = "bind"
          source   = "local/redis.conf"
          target   = "/usr/local/etc/redis/redis.conf"
          readonly = true
        }

        dynamic "mount" {
          for_each = var.scratch
          iterator = m

          content {
            type   = "tmpfs"
            target = m.value.target
            tmpfs_options {
              size = m.value.size * 1024 * 1024
            }
          }
        }
      }
    }
  }
}
