# Environment from a template into secrets/, and a KV-backed config.
job "secrets-env" {
  datacenters = ["dc1"]

  group "app" {
    task "app" {
      driver = "docker"

      config {
        image = "example/app:3"
      }

      template {
        data        = <<-EOT
          DB_HOST={{ keyOrDefault "app/db/host" "localhost" }}
          DB_PORT={{ keyOrDefault "app/db/port" "5432" }}
          EOT
        destination = "secrets/db.env"
        env         = true
        change_mode = "restart"
      }

      template {
        data        = "{{ key \"app/config\" }}"
        destination = "local/config.json"
        perms       = "0640"
        change_mode = "signal"
        change_signal = "SIGHUP"
      }
    }
  }
}
