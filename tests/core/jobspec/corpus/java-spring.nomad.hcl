# A Java service started from a downloaded jar, with JVM options.
job "spring" {
  datacenters = ["dc1"]

  group "app" {
    network {
      port "http" {}
    }

    task "app" {
      driver = "java"

      artifact {
        source = "https://repo.example.com/app/app-1.0.jar"
        options {
          checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
        }
      }

      config {
        jar_path    = "local/app-1.0.jar"
        jvm_options = ["-Xmx256m", "-Xms128m"]
        args        = ["--server.port=${NOMAD_PORT_http}"]
      }

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}
