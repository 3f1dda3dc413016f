# A virtual machine serving HTTP: the host's kernel and a busybox initramfs (build-guest.py), booted
# under QEMU; the task's port "http" is forwarded to port 80 in the guest. Ctrl-C presses the guest's
# power button, and the guest powers off by itself.
#
#   examples/qemu-web/build-guest.py
#   herder run --logs --config examples/qemu-web/herder.toml examples/qemu-web/web.hcl

variable "guest" {
  type        = string
  default     = "/tmp/herder-qemu-web"
  description = "the directory build-guest.py wrote kernel and initrd into"
}

job "qemu-web" {
  type = "service"

  group "web" {
    task "vm" {
      driver       = "qemu"
      kill_timeout = "20s"

      config {
        kernel            = "${var.guest}/kernel"
        initrd            = "${var.guest}/initrd"
        append            = "console=ttyS0 quiet panic=-1 herder_alloc=${NOMAD_ALLOC_NAME}"
        graceful_shutdown = true
        port_map {
          http = 80
        }
      }

      resources {
        memory = 192
        network {
          port "http" {}
        }
      }
    }
  }
}
