# A QEMU virtual machine from a downloaded image with a forwarded port.
job "vm" {
  datacenters = ["dc1"]

  group "vm" {
    network {
      port "ssh" {}
    }

    task "vm" {
      driver = "qemu"

      artifact {
        source = "https://images.example.com/alpine-3.19.qcow2"
      }

      config {
        image_path  = "local/alpine-3.19.qcow2"
        accelerator = "kvm"
        graceful_shutdown = true
        args        = ["-nodefaults", "-nographic"]
        port_map {
          ssh = 22
        }
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
