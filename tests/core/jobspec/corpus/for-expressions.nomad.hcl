# for expressions building env and args from variables.
variable "settings" {
  type = map(string)
  default = {
    LOG_LEVEL = "debug"
    REGION    = "eu"
  }
}

variable "peers" {
  type    = list(string)
  default = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
}

job "cluster" {
  datacenters = ["dc1"]

  group "node" {
    task "node" {
      driver = "exec"

      config {
        command = "/usr/local/bin/node"
        args    = [for peer in var.peers : "--join=${peer}:7946" if peer != "10.0.0.3"]
      }

      env = { for key, value in var.settings : "APP_${key}" => upper(value) }
    }
  }
}
