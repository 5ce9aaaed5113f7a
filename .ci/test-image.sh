#!/usr/bin/env bash
# Builds the Docker image the runtime tests use, without any image registry:
# debootstrap a minimal Debian root file system from the Debian package
# mirror, then `docker import` it. Idempotent: an existing image is reused
# (FORCE=1 rebuilds it).
#
#   SANDBOX_TEST_IMAGE   image name (default sandboxcore-test:latest)
#   DEBOOTSTRAP_SUITE    Debian suite (default bookworm)
#   DEBOOTSTRAP_MIRROR   mirror URL (default http://deb.debian.org/debian)
#
# The image holds sh, bash, coreutils, procps (kill, ps), git and
# ca-certificates: what internal/runtime/runtimetest and the Docker runtime's
# git tests need. It has no ENTRYPOINT; the Docker runtime runs its own init.
set -euo pipefail

IMAGE=${SANDBOX_TEST_IMAGE:-sandboxcore-test:latest}
SUITE=${DEBOOTSTRAP_SUITE:-bookworm}
MIRROR=${DEBOOTSTRAP_MIRROR:-http://deb.debian.org/debian}

if ! docker version >/dev/null 2>&1; then
  echo "test-image: no Docker daemon answers (start dockerd first)" >&2
  exit 1
fi
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "test-image: $IMAGE already present"
  exit 0
fi
if ! command -v debootstrap >/dev/null; then
  "$(dirname "$0")/apt-get.sh" install -y -qq debootstrap # waits for the apt/dpkg locks
fi

# One build at a time on this machine.
exec 9>/var/lock/sandboxcore-test-image.lock
flock 9
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "test-image: $IMAGE already present"
  exit 0
fi

dir=$(mktemp -d /var/tmp/sandboxcore-rootfs.XXXXXX)
cleanup() {
  # debootstrap may leave proc/sys mounted inside the target on failure:
  # unmount before deleting, and never cross into another file system.
  # (No mount left is the usual case: grep then finds nothing, which must not
  # fail the trap under set -e -o pipefail.)
  { grep -o " $dir/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf --one-file-system "$dir"
}
trap cleanup EXIT

start=$(date +%s)
debootstrap --variant=minbase --include=git,ca-certificates,procps \
  "$SUITE" "$dir" "$MIRROR" >"$dir.log" 2>&1 || { tail -30 "$dir.log" >&2; rm -f "$dir.log"; exit 1; }
rm -f "$dir.log"
# Keep the image small: package caches, lists, documentation.
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/cache/apt/*.bin \
  "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/* \
  "$dir"/usr/share/info/* "$dir"/var/log/*.log
tar -C "$dir" --numeric-owner -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/sh"]' \
  --message "sandboxcore test image: debootstrap --variant=minbase $SUITE" \
  - "$IMAGE" >/dev/null
echo "test-image: built $IMAGE in $(( $(date +%s) - start ))s ($(docker image inspect -f '{{.Size}}' "$IMAGE") bytes)"
