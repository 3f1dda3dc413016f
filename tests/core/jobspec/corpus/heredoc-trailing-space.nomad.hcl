# A template whose closing marker has trailing spaces (editors leave them).
job "heredoc-space" {
  datacenters = ["dc1"]

  group "app" {
    task "app" {
      driver = "raw_exec"

      config {
        command = "/bin/cat"
        args    = ["local/app.env"]
      }

      template {
        data        = <<EOH
APP_PORT={{ env "NOMAD_PORT_http" }}
APP_NAME=demo
EOH   
        destination = "local/app.env"
        env         = true
      }
    }
  }
}
