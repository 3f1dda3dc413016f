#!/usr/bin/env bash
# Builds the image the docker examples and tests use, herder-test/busybox:1,
# FROM scratch out of the host's static busybox: nothing is pulled.
#
#   examples/docker/build-busybox-image.sh [TAG]
#
# Needs the docker CLI, a running daemon and a static busybox
# (Debian: apt-get install busybox-static).
set -euo pipefail

tag=${1:-herder-test/busybox:1}
busybox=${BUSYBOX:-/bin/busybox}

if [ ! -x "$busybox" ]; then
    echo "error: no busybox at $busybox (Debian: apt-get install busybox-static)" >&2
    exit 1
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$busybox" "$context/busybox"
cat > "$context/Dockerfile" <<DOCKERFILE
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
LABEL herder.test.busybox.sha256=$(sha256sum "$busybox" | cut -d' ' -f1)
DOCKERFILE

DOCKER_BUILDKIT=0 docker build --quiet --tag "$tag" "$context"
echo "built $tag"
