# A web server in a container, run by herder's docker driver under Nomad.
# The image is the test image `make busybox-image` builds from the host's busybox.
job "herder-web" {
  datacenters = ["dc1"]

  group "web" {
    network {
      port "http" {
        to = 8080
      }
    }

    task "server" {
      driver       = "herder"
      kill_timeout = "3s"

      config {
        driver = "docker"
        config = {
          image   = "herder-test/busybox:1"
          command = "httpd"
          args    = ["-f", "-p", "8080", "-h", "/local"]
        }
      }

      template {
        data        = "hello from herder's docker driver, under Nomad\n"
        destination = "local/index.html"
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
