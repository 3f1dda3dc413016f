# Port numbers and resources written as strings, as HCL2 (cty) converts them.
job "string-ports" {
  datacenters = ["dc1"]

  group "api" {
    network {
      port "http" {
        static = "9001"
        to     = "9001"
      }
    }

    task "api" {
      driver = "docker"

      config {
        image = "hashicorp/http-echo:1.0"
        args  = ["-listen", ":9001", "-text", "hello"]
        ports = ["http"]
      }

      resources {
        cpu    = "200"
        memory = "128"
      }
    }
  }
}
