# Init, sidecar and cleanup tasks around a main task (Nomad's task dependencies guide).
job "app-with-deps" {
  datacenters = ["dc1"]

  group "app" {
    task "wait-for-db" {
      lifecycle {
        hook    = "prestart"
        sidecar = false
      }

      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "until nc -z db.service.consul 5432; do sleep 1; done"]
      }
    }

    task "log-shipper" {
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }

      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "tail -F ${NOMAD_ALLOC_DIR}/logs/main.stdout.0"]
      }
    }

    task "main" {
      driver = "docker"
      config {
        image = "nginx:1.25"
      }
      resources {
        cpu    = 200
        memory = 128
      }
    }

    task "announce" {
      lifecycle {
        hook = "poststart"
      }
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = ["started"]
      }
    }

    task "cleanup" {
      lifecycle {
        hook = "poststop"
      }
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "rm -rf ${NOMAD_ALLOC_DIR}/data/tmp"]
      }
    }
  }
}
