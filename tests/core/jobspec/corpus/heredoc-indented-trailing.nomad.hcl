# An indented heredoc (<<-) whose closer is followed by a tab and spaces.
job "heredoc-indented" {
  datacenters = ["dc1"]

  group "app" {
    task "nginx" {
      driver = "docker"

      config {
        image = "nginx:1.25"
        volumes = ["local/default.conf:/etc/nginx/conf.d/default.conf"]
      }

      template {
        data = <<-EOF
          server {
            listen 8080;
            location / {
              return 200 "ok";
            }
          }
          EOF	  
        destination   = "local/default.conf"
        change_mode   = "signal"
        change_signal = "SIGHUP"
      }
    }
  }
}
