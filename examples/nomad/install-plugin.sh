#!/bin/sh
# Link herder's Nomad plugin into the example agent's plugin_dir, under the name "herder".
set -eu
plugin="$(command -v nomad-driver-herder || true)"
if [ -z "$plugin" ]; then
    echo "nomad-driver-herder is not on PATH: pip install ./integrations/nomad (and ./plugins/docker)" >&2
    exit 1
fi
mkdir -p /tmp/herder-nomad-example/plugins
ln -sf "$plugin" /tmp/herder-nomad-example/plugins/herder
echo "linked $plugin as /tmp/herder-nomad-example/plugins/herder"
