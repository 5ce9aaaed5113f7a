#!/usr/bin/env bash
# Builds, without any image registry, the one image that stands in for every
# registry image of docker-compose.yaml (docs/PRODUCTION.md "Without a
# registry"; used with deploy/local/docker-compose.local.yaml):
#
#   sandboxcore-stack-base:bookworm  debootstrap of Debian with PostgreSQL 15
#                                    and Prometheus from Debian's packages, git
#                                    and netcat; built once (FORCE=1 rebuilds),
#                                    like .ci/test-image.sh
#   sandboxcore-stack:local          that base plus this checkout's binaries:
#                                    sandbox-worker, sandboxctl, and
#                                    sandbox-temporal (the Temporal server,
#                                    schema tool and Web UI built from the
#                                    go.temporal.io/server and ui-server
#                                    modules of go.mod), and the PostgreSQL
#                                    entrypoint; rebuilt when they changed
#                                    (a few seconds: one COPY layer)
#
# Grafana has no Debian package, so the local stack runs without it (its
# dashboard is checked against the local Prometheus instead, make test-compose).
#
#   SANDBOX_STACK_IMAGE   image name (default sandboxcore-stack:local)
#   DEBOOTSTRAP_SUITE     Debian suite (default bookworm)
#   DEBOOTSTRAP_MIRROR    mirror URL (default http://deb.debian.org/debian)
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE=${SANDBOX_STACK_IMAGE:-sandboxcore-stack:local}
SUITE=${DEBOOTSTRAP_SUITE:-bookworm}
MIRROR=${DEBOOTSTRAP_MIRROR:-http://deb.debian.org/debian}
BASE=sandboxcore-stack-base:$SUITE
PACKAGES=ca-certificates,git,procps,netcat-openbsd,postgresql-15,prometheus
# The base is rebuilt when its package list changes.
BASE_ID=$(printf '%s %s' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-16)

if ! docker version >/dev/null 2>&1; then
  echo "stack-image: no Docker daemon answers (start dockerd first)" >&2
  exit 1
fi

have_base() {
  [ "$(docker image inspect -f '{{index .Config.Labels "org.sandboxcore.base-id"}}' "$BASE" 2>/dev/null)" = "$BASE_ID" ]
}

build_base() {
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
  local dir start
  dir=$(mktemp -d /var/tmp/sandboxcore-stack-rootfs.XXXXXX)
  # shellcheck disable=SC2064
  trap "{ grep -o ' $dir/[^ ]*' /proc/mounts || true; } | sort -r | while read -r m; do umount -l \"\$m\" || true; done; rm -rf --one-file-system '$dir' '$dir.log'" RETURN
  start=$(date +%s)
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$dir" "$MIRROR" >"$dir.log" 2>&1 \
    || { tail -30 "$dir.log" >&2; return 1; }
  # The package's own cluster is not used: PGDATA is initialized on first start.
  rm -rf "$dir"/var/lib/postgresql/15 "$dir"/etc/postgresql/15
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/cache/apt/*.bin "$dir"/var/lib/apt/lists/* \
    "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/var/log/*.log
  tar -C "$dir" --numeric-owner -c . | docker import \
    --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "LABEL org.sandboxcore.base-id=$BASE_ID" \
    --change 'CMD ["/bin/sh"]' \
    --message "sandboxcore stack base: debootstrap --variant=minbase --include=$PACKAGES $SUITE" \
    - "$BASE" >/dev/null
  echo "stack-image: built $BASE in $(( $(date +%s) - start ))s"
}

# One build at a time on this machine.
exec 9>/var/lock/sandboxcore-stack-image.lock
flock 9
if [ "${FORCE:-0}" = 1 ] || ! have_base; then
  build_base
else
  echo "stack-image: $BASE already present"
fi

ctx=$(mktemp -d /var/tmp/sandboxcore-stack-ctx.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/bin"
start=$(date +%s)
for p in worker:sandbox-worker starter:sandboxctl internal/stackserver:sandbox-temporal; do
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$ctx/bin/${p#*:}" "./${p%%:*}"
done
cp deploy/local/sandbox-postgres deploy/local/Dockerfile "$ctx/"
echo "stack-image: binaries built in $(( $(date +%s) - start ))s"
docker build -q --build-arg "BASE=$BASE" -t "$IMAGE" "$ctx" >/dev/null
echo "stack-image: $IMAGE ready ($(docker image inspect -f '{{.Size}}' "$IMAGE") bytes)"
