variable "replicas" {
  type = number
}

job "web" {
  group "app" {
    count = var.replicas
    task "server" {
      driver = "raw_exec"
    }
  }
}
