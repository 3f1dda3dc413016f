# Nomad's Consul Connect demo, countdash, with busybox in place of its images.
#
# The API listens on 127.0.0.1:9001 inside its allocation's network namespace:
# nothing outside reaches it but its sidecar proxy. The dashboard reaches it
# only through its upstream, 127.0.0.1:8080 inside its own namespace, where its
# sidecar listens and connects to the API's sidecar over mutual TLS.
#
# Needs a Consul agent with Connect on (`consul agent -dev` has it) and herder
# configured with `[services] backend = "consul"`, root, and the CNI plugins:
#
#   herder run --config consul.toml examples/countdash.nomad
#   curl http://127.0.0.1:9002/cgi-bin/count          # the API's answer, through the mesh
#   consul intention create -deny count-dashboard count-api
#   curl http://127.0.0.1:9002/cgi-bin/count          # now refused
job "countdash" {
  datacenters = ["dc1"]

  group "api" {
    network {
      mode = "bridge"
    }

    service {
      name = "count-api"
      port = "9001"

      connect {
        sidecar_service {}
      }
    }

    task "web" {
      driver = "raw_exec"
      user   = "nobody"

      config {
        command = "busybox"
        args    = ["httpd", "-f", "-p", "127.0.0.1:9001", "-h", "local/www"]
      }

      template {
        destination = "local/www/index.html"
        data        = "{\"count\": 1, \"hostname\": \"{{ env \"NOMAD_ALLOC_ID\" }}\"}\n"
      }
    }
  }

  group "dashboard" {
    network {
      mode = "bridge"

      port "http" {
        static = 9002
        to     = 9002
      }
    }

    service {
      name = "count-dashboard"
      port = "http"

      connect {
        sidecar_service {
          proxy {
            upstreams {
              destination_name = "count-api"
              local_bind_port  = 8080
            }
          }
        }
      }
    }

    task "dashboard" {
      driver = "raw_exec"
      user   = "nobody" # a web server reachable from the network, and its CGI: not as root

      env {
        COUNTING_SERVICE_URL = "http://${NOMAD_UPSTREAM_ADDR_count_api}"
      }

      config {
        command = "busybox"
        args    = ["httpd", "-f", "-p", "0.0.0.0:${NOMAD_PORT_http}", "-h", "local/www"]
      }

      # The dashboard's page: the API's answer, fetched through the upstream.
      template {
        destination = "local/www/cgi-bin/count"
        perms       = "0755"
        data        = <<EOF
#!/bin/sh
printf 'Content-Type: application/json\r\n\r\n'
exec busybox wget -q -O - "$COUNTING_SERVICE_URL/"
EOF
      }
    }
  }
}
