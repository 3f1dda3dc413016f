# Nomad 1.x task lifecycle: an init task, a sidecar, the main task and a
# cleanup task after it.
job "app" {
  type = "batch"

  group "app" {
    task "init" {
      driver = "raw_exec"
      lifecycle {
        hook    = "prestart"
        sidecar = false
      }
      config {
        command = "/bin/true"
      }
    }

    task "proxy" {
      driver = "raw_exec"
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
    }

    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }

    task "cleanup" {
      driver = "raw_exec"
      lifecycle {
        hook = "poststop"
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
