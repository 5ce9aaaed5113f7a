#!/usr/bin/env bash
# Builds, without any image registry, the one image that stands in for every
# registry image of docker-compose.yaml (docs/PRODUCTION.md "Without a
# registry"; used with deploy/local/docker-compose.local.yaml):
#
#   sandboxcore-stack-base:bookworm  the runtime tests' Debian image
#                                    (.ci/test-image.sh: debootstrap +
#                                    docker import, built first when missing)
#                                    plus PostgreSQL 15, Prometheus and
#                                    netcat from Debian's packages, installed
#                                    by apt-get in a container of it and
#                                    committed (about 35 s); when containers
#                                    cannot reach the Debian mirror, a
#                                    debootstrap of the same packages instead
#                                    (a few minutes). Built once and reused
#                                    while its inputs are unchanged (FORCE=1
#                                    rebuilds it).
#   sandboxcore-stack:local          that base plus this checkout's binaries:
#                                    sandbox-worker, sandbox-supervisor, sandboxctl, and
#                                    sandbox-temporal (the Temporal server,
#                                    schema tool and Web UI built from the
#                                    go.temporal.io/server and ui-server
#                                    modules of go.mod), and the PostgreSQL
#                                    entrypoint; rebuilt on every run with
#                                    docker create, docker cp and docker
#                                    commit (no builder, so nothing can try a
#                                    registry; a few seconds)
#
# Grafana has no Debian package, so the local stack runs without it (its
# dashboard is checked against the local Prometheus instead, make test-compose).
#
#   SANDBOX_STACK_IMAGE   image name (default sandboxcore-stack:local)
#   SANDBOX_TEST_IMAGE    the Debian image the base starts from (default sandboxcore-test:latest)
#   DEBOOTSTRAP_SUITE     Debian suite of the fallback (default bookworm)
#   DEBOOTSTRAP_MIRROR    mirror URL of the fallback (default http://deb.debian.org/debian)
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE=${SANDBOX_STACK_IMAGE:-sandboxcore-stack:local}
FROM_IMAGE=${SANDBOX_TEST_IMAGE:-sandboxcore-test:latest}
SUITE=${DEBOOTSTRAP_SUITE:-bookworm}
MIRROR=${DEBOOTSTRAP_MIRROR:-http://deb.debian.org/debian}
BASE=sandboxcore-stack-base:$SUITE
# On top of the test image (git, procps, ca-certificates already there).
PACKAGES="netcat-openbsd postgresql-15 prometheus"
PATH_ENV='PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

if ! docker version >/dev/null 2>&1; then
  echo "stack-image: no Docker daemon answers (start dockerd first)" >&2
  exit 1
fi
docker image inspect "$FROM_IMAGE" >/dev/null 2>&1 || SANDBOX_TEST_IMAGE=$FROM_IMAGE bash .ci/test-image.sh
# The base is rebuilt when its package list or the image under it changes.
BASE_ID=$(printf '%s %s %s' "$SUITE" "$PACKAGES" "$(docker image inspect -f '{{.Id}}' "$FROM_IMAGE")" | sha256sum | cut -c1-16)

have_base() {
  [ "$(docker image inspect -f '{{index .Config.Labels "org.sandboxcore.base-id"}}' "$BASE" 2>/dev/null)" = "$BASE_ID" ]
}

# What both ways of building the base do once the packages are in: the
# package's own cluster is not used (PGDATA is initialized on first start),
# caches and documentation go.
TRIM='rm -rf /var/lib/postgresql/15 /etc/postgresql/15 /var/cache/apt/archives/*.deb /var/cache/apt/*.bin /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /usr/share/info/* /var/log/*.log; mkdir -p /prometheus /var/lib/sandboxcore'

# build_base_apt: apt-get in a container of the test image, then commit it.
build_base_apt() {
  local name=sandboxcore-stack-base-build-$$ start rc=0
  start=$(date +%s)
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker run --name "$name" -e DEBIAN_FRONTEND=noninteractive "$FROM_IMAGE" sh -c "
      set -e
      printf 'path-exclude=/usr/share/doc/*\npath-exclude=/usr/share/man/*\npath-exclude=/usr/share/info/*\n' > /etc/dpkg/dpkg.cfg.d/01-sandboxcore-nodoc
      apt-get -qq update
      apt-get -qq install -y --no-install-recommends $PACKAGES >/tmp/apt.log 2>&1 || { tail -30 /tmp/apt.log; exit 1; }
      apt-get clean
      $TRIM" >&2 || rc=$?
  if [ "$rc" = 0 ]; then
    docker commit --change "ENV $PATH_ENV" --change "LABEL org.sandboxcore.base-id=$BASE_ID" --change 'CMD ["/bin/sh"]' \
      --message "sandboxcore stack base: $FROM_IMAGE + apt-get install --no-install-recommends $PACKAGES" "$name" "$BASE" >/dev/null || rc=$?
  fi
  docker rm -f "$name" >/dev/null 2>&1 || true
  [ "$rc" = 0 ] && echo "stack-image: built $BASE in $(( $(date +%s) - start ))s (apt-get in a container of $FROM_IMAGE)"
  return "$rc"
}

# build_base_debootstrap: the same packages by debootstrap on the host, imported.
build_base_debootstrap() {
  command -v debootstrap >/dev/null || bash .ci/apt-get.sh install -y -qq debootstrap
  local dir start
  dir=$(mktemp -d /var/tmp/sandboxcore-stack-rootfs.XXXXXX)
  # shellcheck disable=SC2064
  trap "{ grep -o ' $dir/[^ ]*' /proc/mounts || true; } | sort -r | while read -r m; do umount -l \"\$m\" || true; done; rm -rf --one-file-system '$dir' '$dir.log'" RETURN
  start=$(date +%s)
  debootstrap --variant=minbase --include="ca-certificates,git,procps,${PACKAGES// /,}" "$SUITE" "$dir" "$MIRROR" >"$dir.log" 2>&1 \
    || { tail -30 "$dir.log" >&2; return 1; }
  chroot "$dir" sh -c "$TRIM"
  tar -C "$dir" --numeric-owner -c . | docker import \
    --change "ENV $PATH_ENV" \
    --change "LABEL org.sandboxcore.base-id=$BASE_ID" \
    --change 'CMD ["/bin/sh"]' \
    --message "sandboxcore stack base: debootstrap --variant=minbase $SUITE with $PACKAGES" \
    - "$BASE" >/dev/null
  echo "stack-image: built $BASE in $(( $(date +%s) - start ))s (debootstrap)"
}

# One build at a time on this machine.
exec 9>/var/lock/sandboxcore-stack-image.lock
flock 9
if [ "${FORCE:-0}" = 1 ] || ! have_base; then
  build_base_apt || {
    echo "stack-image: apt-get in a container failed (no route to the Debian mirror from containers?); debootstrap instead" >&2
    build_base_debootstrap
  }
else
  echo "stack-image: $BASE already present"
fi

ctx=$(mktemp -d /var/tmp/sandboxcore-stack-ctx.XXXXXX)
name=sandboxcore-stack-build-$$
trap 'rm -rf "$ctx"; docker rm -f "$name" >/dev/null 2>&1 || true' EXIT
start=$(date +%s)
for p in worker:sandbox-worker starter:sandboxctl supervisor:sandbox-supervisor internal/stackserver:sandbox-temporal; do
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$ctx/${p#*:}" "./${p%%:*}"
done
install -m 0755 deploy/local/sandbox-postgres "$ctx/sandbox-postgres"
echo "stack-image: binaries built in $(( $(date +%s) - start ))s"
# The binaries as one layer on the base: no Dockerfile, no builder.
docker create --name "$name" "$BASE" >/dev/null
docker cp "$ctx/." "$name:/usr/local/bin/"
docker commit --message "sandboxcore stack: this checkout's binaries on $BASE" "$name" "$IMAGE" >/dev/null
echo "stack-image: $IMAGE ready ($(docker image inspect -f '{{.Size}}' "$IMAGE") bytes)"
