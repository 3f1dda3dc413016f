# A job deployed region by region (Nomad Enterprise's multiregion block).
job "example" {
  type = "service"

  multiregion {
    strategy {
      max_parallel = 1
      on_failure   = "fail_all"
    }

    region "west" {
      count       = 2
      datacenters = ["west-1"]
      meta {
        my-key = "my-value-west"
      }
    }

    region "east" {
      count       = 5
      datacenters = ["east-1", "east-2"]
    }
  }

  update {
    max_parallel = 1
  }

  group "cache" {
    count = 0

    task "redis" {
      driver = "docker"

      config {
        image = "redis:7"
      }
    }
  }
}
