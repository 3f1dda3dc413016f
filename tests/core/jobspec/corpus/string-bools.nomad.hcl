# Booleans and counts written as strings; a number where a string belongs.
job "string-bools" {
  datacenters = ["dc1"]
  type        = "batch"

  group "work" {
    count = "2"

    task "main" {
      driver = "raw_exec"
      leader = "true"
      user   = 0

      config {
        command = "/bin/sh"
        args    = ["-c", "echo working"]
      }

      logs {
        max_files     = "3"
        max_file_size = "5"
      }
    }
  }
}
