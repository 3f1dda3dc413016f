# A Nomad dev agent that loads herder as its task driver `herder` (see docs/nomad.md).
# Paths are relative to where the agent is started: run `nomad agent -dev -config agent.hcl`
# from this folder after `./install-plugin.sh`.
bind_addr  = "127.0.0.1"
data_dir   = "/tmp/herder-nomad-example/nomad"
plugin_dir = "/tmp/herder-nomad-example/plugins"

# Away from Nomad's defaults (4646-4648), so that it runs beside another agent.
ports {
  http = 7646
  rpc  = 7647
  serf = 7648
}

advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}

consul {
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}

# herder's own configuration: the file in plugin_dir is named "herder", so this block is its.
plugin "herder" {
  config {
    # Where herder keeps its process supervisor's socket (tasks outlive the plugin).
    data_dir = "/tmp/herder-nomad-example/herder"
    # [plugin.NAME] tables of herder.toml, as an HCL object.
    plugin = {
      raw_exec = { enabled = true }   # off unless enabled, like Nomad's own raw_exec
      docker   = { cleanup_image = false }
    }
    # disabled_plugins = ["exec"]
  }
}
