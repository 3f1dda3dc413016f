# A port taken from a string variable: converted where the schema wants a number.
variable "port" {
  type    = string
  default = "8080"
}

job "variable-port" {
  datacenters = ["dc1"]

  group "web" {
    network {
      port "http" {
        static = var.port
      }
    }

    task "web" {
      driver = "exec"

      config {
        command = "/bin/busybox"
        args    = ["httpd", "-f", "-p", "${NOMAD_PORT_http}"]
      }
    }
  }
}
