# Group-level network and services, with script and http checks and check_restart.
job "group-services" {
  datacenters = ["dc1"]

  group "web" {
    network {
      port "http" {
        to = 80
      }
    }

    service {
      name = "web"
      port = "http"

      check {
        type     = "http"
        path     = "/"
        interval = "10s"
        timeout  = "2s"

        check_restart {
          limit = 3
          grace = "90s"
          ignore_warnings = false
        }
      }

      check {
        type     = "script"
        name     = "config-present"
        task     = "web"
        command  = "/bin/test"
        args     = ["-f", "/etc/nginx/nginx.conf"]
        interval = "30s"
        timeout  = "5s"
      }
    }

    task "web" {
      driver = "docker"
      config {
        image = "nginx:1.25"
        ports = ["http"]
      }
    }
  }
}
