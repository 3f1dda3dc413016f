#!/usr/bin/env bash
# Builds an App Container image (ACI) out of the host's static busybox, the
# image the rkt example runs: example.local/busybox:1.0.0. Nothing is pulled
# and nothing is signed (run it with insecure_options = ["image"]).
#
#   examples/rkt/build-busybox-aci.sh [OUT.aci]          (default: busybox.aci)
#   rkt fetch --insecure-options=image busybox.aci       (imports it into rkt's store)
#
# An ACI is a tar of a JSON `manifest` and a `rootfs/` directory. Needs a static
# busybox (Debian: apt-get install busybox-static).
set -euo pipefail

out=${1:-busybox.aci}
busybox=${BUSYBOX:-/bin/busybox}
name=${ACI_NAME:-example.local/busybox}
version=${ACI_VERSION:-1.0.0}

if ! file -L "$busybox" 2>/dev/null | grep -q "statically linked"; then
    echo "error: no static busybox at $busybox (Debian: apt-get install busybox-static)" >&2
    exit 1
fi

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
mkdir -p "$build/rootfs/bin" "$build/rootfs/etc" "$build/rootfs/tmp"
chmod 1777 "$build/rootfs/tmp"
cp "$busybox" "$build/rootfs/bin/busybox"
for applet in sh echo printf sleep cat ls env id httpd hostname wc true false kill ps mkdir touch tr grep; do
    ln -s busybox "$build/rootfs/bin/$applet"
done
printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n' > "$build/rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$build/rootfs/etc/group"
cat > "$build/manifest" <<MANIFEST
{
  "acKind": "ImageManifest",
  "acVersion": "0.8.11",
  "name": "$name",
  "labels": [
    {"name": "version", "value": "$version"},
    {"name": "os", "value": "linux"},
    {"name": "arch", "value": "amd64"}
  ],
  "app": {
    "exec": ["/bin/sh", "-c", "echo hello from the image"],
    "user": "0",
    "group": "0",
    "ports": [{"name": "http", "protocol": "tcp", "port": 8080}]
  }
}
MANIFEST
tar --numeric-owner --owner=0 --group=0 -C "$build" -cf "$out" manifest rootfs
echo "built $out ($name:$version)"
