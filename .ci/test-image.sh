#!/usr/bin/env bash
# Builds the Docker image the runtime tests use, without any image registry:
# debootstrap a minimal Debian root file system from the Debian package
# mirror, then `docker import` it. Idempotent: an existing image is reused
# while it was built from the same recipe (the suite and the package list,
# recorded in its label org.sandboxcore.test-image); FORCE=1 rebuilds it.
#
#   SANDBOX_TEST_IMAGE   image name (default sandboxcore-test:latest)
#   DEBOOTSTRAP_SUITE    Debian suite (default bookworm)
#   DEBOOTSTRAP_MIRROR   mirror URL (default http://deb.debian.org/debian)
#
# The image holds sh, bash, coreutils, procps (kill, ps), git and
# ca-certificates: what internal/runtime/runtimetest and the Docker runtime's
# git tests need; and zsh, which Daytona's toolbox runs its commands with
# when a sandbox has it (as Daytona's default snapshot does), so that the
# Daytona stand-in's sandboxes do too. It has no ENTRYPOINT; the Docker
# runtime runs its own init.
set -euo pipefail

IMAGE=${SANDBOX_TEST_IMAGE:-sandboxcore-test:latest}
SUITE=${DEBOOTSTRAP_SUITE:-bookworm}
MIRROR=${DEBOOTSTRAP_MIRROR:-http://deb.debian.org/debian}
PACKAGES=git,ca-certificates,procps,zsh
# What the image is made of; an image with another recipe is rebuilt.
RECIPE=$(printf 'minbase %s %s' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-16)

have_image() {
  [ "$(docker image inspect -f '{{index .Config.Labels "org.sandboxcore.test-image"}}' "$IMAGE" 2>/dev/null)" = "$RECIPE" ]
}

if ! docker version >/dev/null 2>&1; then
  echo "test-image: no Docker daemon answers (start dockerd first)" >&2
  exit 1
fi
if [ "${FORCE:-0}" != 1 ] && have_image; then
  echo "test-image: $IMAGE already present"
  exit 0
fi
if ! command -v debootstrap >/dev/null; then
  "$(dirname "$0")/apt-get.sh" install -y -qq debootstrap # waits for the apt/dpkg locks
fi

# One build at a time on this machine.
exec 9>/var/lock/sandboxcore-test-image.lock
flock 9
if [ "${FORCE:-0}" != 1 ] && have_image; then
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
debootstrap --variant=minbase --include="$PACKAGES" \
  "$SUITE" "$dir" "$MIRROR" >"$dir.log" 2>&1 || { tail -30 "$dir.log" >&2; rm -f "$dir.log"; exit 1; }
rm -f "$dir.log"
# Keep the image small: package caches, lists, documentation.
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/cache/apt/*.bin \
  "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/* \
  "$dir"/usr/share/info/* "$dir"/var/log/*.log
tar -C "$dir" --numeric-owner -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/sh"]' \
  --change "LABEL org.sandboxcore.test-image=$RECIPE" \
  --message "sandboxcore test image: debootstrap --variant=minbase $SUITE with $PACKAGES" \
  - "$IMAGE" >/dev/null
echo "test-image: built $IMAGE in $(( $(date +%s) - start ))s ($(docker image inspect -f '{{.Size}}' "$IMAGE") bytes)"
