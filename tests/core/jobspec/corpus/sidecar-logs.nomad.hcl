# A main task with a poststart sidecar that ships its logs.
job "logs" {
  datacenters = ["dc1"]

  group "app" {
    task "app" {
      driver = "docker"
      config {
        image = "example/app:2.0"
      }
    }

    task "shipper" {
      driver = "docker"

      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      config {
        image = "fluent/fluent-bit:2.2"
        args  = ["-i", "tail", "-p", "path=/alloc/logs/app.stdout.0", "-o", "stdout"]
      }
    }
  }
}
