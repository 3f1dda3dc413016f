# A virtual machine image with the qemu driver.
job "vm" {
  datacenters = ["dc1"]

  group "vm" {
    task "vm" {
      driver = "qemu"

      artifact {
        source = "https://example.com/images/linux.qcow2"
      }

      config {
        image_path  = "local/linux.qcow2"
        accelerator = "kvm"
        args        = ["-nodefaults", "-nodefconfig"]
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
