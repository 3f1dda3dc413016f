# A dispatchable job: `nomad job dispatch -meta input=... video-encode payload.json`.
job "video-encode" {
  datacenters = ["dc1"]
  type        = "batch"

  parameterized {
    payload       = "required"
    meta_required = ["input"]
    meta_optional = ["profile"]
  }

  meta {
    profile = "small"
  }

  group "encode" {
    task "ffmpeg" {
      driver = "docker"

      dispatch_payload {
        file = "config.json"
      }

      config {
        image = "jrottenberg/ffmpeg:4.4-alpine"
        args  = ["-i", "${NOMAD_META_input}", "-preset", "${NOMAD_META_profile}", "/alloc/data/out.mp4"]
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
