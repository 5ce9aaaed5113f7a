#!/usr/bin/env bash
# apt-get that waits for the apt and dpkg locks instead of giving up when
# another apt-get or dpkg (an unattended upgrade, a parallel install) holds
# them: `make run`, `make test` and .ci/run install packages through it.
#
#   .ci/apt-get.sh update -qq
#   .ci/apt-get.sh install -y -qq bubblewrap
#
# The wait is bounded by SANDBOX_APT_LOCK_TIMEOUT seconds (default 300); a
# failure for any other reason, or a lock still held at the deadline, fails
# at once with apt-get's own message. dpkg's frontend lock is waited for by
# apt itself (DPkg::Lock::Timeout); the lists and archives locks, which apt
# does not wait for, are retried here every 3 seconds.
set -uo pipefail
timeout=${SANDBOX_APT_LOCK_TIMEOUT:-300}
case $timeout in ''|*[!0-9]*) echo "apt-get.sh: SANDBOX_APT_LOCK_TIMEOUT=$timeout: want a number of seconds" >&2; exit 2 ;; esac
deadline=$(( $(date +%s) + timeout ))
err=$(mktemp)
trap 'rm -f "$err"' EXIT
said=
while :; do
  left=$(( deadline - $(date +%s) ))
  [ "$left" -gt 0 ] || left=0
  code=0
  DEBIAN_FRONTEND=noninteractive apt-get -o "DPkg::Lock::Timeout=$left" "$@" 2>"$err" || code=$?
  if [ "$code" -eq 0 ]; then
    cat "$err" >&2
    exit 0
  fi
  if ! grep -qE 'Could not get lock|Unable to lock|Unable to acquire the dpkg frontend lock' "$err" || [ "$(date +%s)" -ge "$deadline" ]; then
    cat "$err" >&2
    [ -z "$said" ] || echo "apt-get.sh: gave up after waiting ${timeout}s for the apt/dpkg lock (SANDBOX_APT_LOCK_TIMEOUT)" >&2
    exit "$code"
  fi
  if [ -z "$said" ]; then
    echo "apt-get.sh: another apt-get or dpkg holds a lock; waiting up to ${timeout}s ($(grep -m1 -oE 'held by process [0-9]+ \([^)]*\)' "$err" || echo 'holder unknown'))" >&2
    said=1
  fi
  sleep 3
done
