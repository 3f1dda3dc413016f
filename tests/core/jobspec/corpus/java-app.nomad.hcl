# A Java application from an artifact, with the java driver.
job "java-app" {
  datacenters = ["dc1"]

  group "app" {
    task "app" {
      driver = "java"

      artifact {
        source = "https://example.com/releases/app-1.0.jar"
      }

      config {
        jar_path    = "local/app-1.0.jar"
        jvm_options = ["-Xmx512m", "-Xms256m"]
      }

      resources {
        cpu    = 500
        memory = 768
      }
    }
  }
}
