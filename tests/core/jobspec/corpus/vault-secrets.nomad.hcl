# Secrets from Vault through a template (Nomad 1.7 workload identity).
job "postgres-client" {
  datacenters = ["dc1"]

  group "app" {
    task "app" {
      driver = "docker"

      vault {
        role        = "app"
        change_mode = "restart"
      }

      config {
        image = "example/app:1.2"
      }

      template {
        data        = <<EOH
{{ with secret "database/creds/readonly" }}
DB_USER="{{ .Data.username }}"
DB_PASS="{{ .Data.password }}"
{{ end }}
EOH
        destination = "secrets/db.env"
        env         = true
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
