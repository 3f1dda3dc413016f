# A binary fetched by an artifact, run by the exec driver, with a script check.
job "consul-esm" {
  datacenters = ["dc1"]

  group "esm" {
    task "esm" {
      driver = "exec"

      artifact {
        source      = "https://releases.hashicorp.com/consul-esm/0.7.1/consul-esm_0.7.1_linux_amd64.zip"
        destination = "local/bin"
        options {
          checksum = "sha256:1b4a0d2e4b5a4a5d0c1f6a9b3c52b0a1d7c4f3e9e8f4b6a9d2c1e0f9a8b7c6d5"
        }
      }

      config {
        command = "local/bin/consul-esm"
        args    = ["-config-file=${NOMAD_TASK_DIR}/esm.hcl"]
      }

      template {
        data        = <<-EOT
          log_level = "INFO"
          consul_service = "consul-esm"
        EOT
        destination = "local/esm.hcl"
      }

      service {
        name = "consul-esm"

        check {
          type     = "script"
          command  = "/bin/sh"
          args     = ["-c", "pgrep consul-esm"]
          interval = "30s"
          timeout  = "5s"
        }
      }

      logs {
        max_files     = 3
        max_file_size = 10
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
