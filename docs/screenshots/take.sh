#!/usr/bin/env bash
# Takes the Web UI screenshots of docs/OPERATIONS.md: starts a worker on the
# embedded Temporal server with its Web UI (sessions kept on the shared task
# queue, as in production, so a session's first run carries both its static
# summary and its current details), makes a few sessions with sandboxctl,
# and runs shoot.mjs (headless Chromium: apt-get install chromium; npm ci here).
#
#   docs/screenshots/take.sh      # writes docs/ui-sessions-list.png and docs/ui-session.png
set -euo pipefail
# Chromium aborts page loads with ERR_NETWORK_CHANGED whenever a network
# interface appears (Docker containers starting on this machine): run in a
# network namespace of our own, loopback only, when we may.
if [ -z "${TAKE_IN_NETNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
  exec unshare --net env TAKE_IN_NETNS=1 bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
command -v chromium >/dev/null || { echo "take.sh: install chromium (apt-get install chromium)" >&2; exit 1; }
[ -d "$here/node_modules/puppeteer-core" ] || (cd "$here" && npm ci --no-audit --no-fund --ignore-scripts)
make build >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
tport=$(free_port) uiport=$(free_port)
data=$(mktemp -d /var/tmp/sandboxcore-shots.XXXXXX)
SANDBOX_DATA_DIR=$data SANDBOX_ALLOW_FILE_URLS=1 SANDBOX_TEMPORAL_PORT=$tport SANDBOX_UI_PORT=$uiport \
  SANDBOX_SESSION_ON_HOST_QUEUE=0 SANDBOX_HOST_ID=host-a SANDBOX_EVICTION_INTERVAL=0 \
  bin/sandbox-worker >"$data/worker.log" 2>&1 &
worker=$!
trap 'kill "$worker" 2>/dev/null; wait "$worker" 2>/dev/null; rm -rf --one-file-system "$data" /tmp/acme' EXIT
for _ in $(seq 1 120); do grep -q 'worker ready' "$data/worker.log" && break; sleep 1; done
export TEMPORAL_ADDRESS=127.0.0.1:$tport

repo=/tmp/acme/webapp
rm -rf /tmp/acme
mkdir -p "$repo"
git -C "$repo" init -q -b main
echo "# webapp" >"$repo/README.md"
git -C "$repo" add README.md
git -C "$repo" -c user.name=dev -c user.email=dev@example.invalid commit -q -m initial
ctl() { bin/sandboxctl "$@"; }
id() { sed -n 's/.*"workspace_id": "\(.*\)".*/\1/p'; }

a=$(ctl acquire --repo "file://$repo" --user alice --project webapp --mode edit --conversation c42 --json | id)
ctl exec "$a" -- sh -c 'ls >/dev/null' >/dev/null
echo 'hello from the agent' | ctl write "$a" notes/hello.txt
ctl commit "$a" -m "agent: say hello" >/dev/null
echo 'work in progress' | ctl write "$a" notes/wip.txt
ctl status "$a" >/dev/null
ctl exec "$a" -- sh -c 'exit 3' >/dev/null || true
b=$(ctl acquire --repo "file://$repo" --user bob --project webapp --mode task --task fix-login --json | id)
ctl exec "$b" -- true >/dev/null
c=$(ctl acquire --repo "file://$repo" --user alice --project webapp --mode analysis --ref main --json | id)
ctl read "$c" README.md >/dev/null
d=$(ctl acquire --repo "file://$repo" --user carol --project billing --mode edit --conversation c7 --json | id)
ctl release "$d" >/dev/null
sleep 3 # visibility is eventually consistent

node "$here/shoot.mjs" "http://127.0.0.1:$uiport" "sandbox-session/${a#ws-}" "$root/docs"
echo "take.sh: wrote docs/ui-sessions-list.png and docs/ui-session.png"
