# An artifact fetched from a git repository through go-getter's git:: prefix.
job "git-checkout" {
  datacenters = ["dc1"]
  type        = "batch"

  group "build" {
    task "build" {
      driver = "raw_exec"

      artifact {
        source      = "git::https://github.com/hashicorp/nomad-guides"
        destination = "local/repo"
        options {
          ref   = "master"
          depth = 1
        }
      }

      config {
        command = "/bin/ls"
        args    = ["local/repo"]
      }
    }
  }
}
