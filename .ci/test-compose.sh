#!/usr/bin/env bash
# make test-compose: the production stack (docker-compose.yaml), started for
# real from locally built images (deploy/local, no registry), driven end to
# end through the Temporal frontend it exposes, then brought down:
#
#   1. build the images (deploy/local/build-images.sh: the Debian base is
#      built once and reused; this checkout's binaries are one committed layer)
#   2. docker-compose config validates the published file and the override
#   3. up: PostgreSQL, the schema job, Temporal, the namespace job, the Web
#      UI, the worker (PostgreSQL store, Docker runtime) and Prometheus;
#      wait for the healthchecks and the one-shot jobs
#   4. acquire -> exec -> write -> commit with sandboxctl against the exposed
#      frontend; the commit is checked in the repo cache
#   5. the Web UI answers and lists the session; Prometheus scrapes the
#      worker and Temporal (targets up, sandbox_exec_results_total moved) and
#      every query of the Grafana dashboard is valid PromQL there
#   6. down -v (always), and the session's runtime container is removed
#
# Needs Docker, a compose CLI, curl, python3 and the runtime image
# (SANDBOX_RUNTIME_IMAGE, default sandboxcore-test:latest from .ci/test-image.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
log() { echo "test-compose: $* ($(( $(date +%s) - start ))s)"; }

if docker compose version >/dev/null 2>&1; then COMPOSE=(docker compose); else COMPOSE=(docker-compose); fi
export SANDBOX_RUNTIME_IMAGE=${SANDBOX_RUNTIME_IMAGE:-sandboxcore-test:latest}
docker image inspect "$SANDBOX_RUNTIME_IMAGE" >/dev/null 2>&1 || bash .ci/test-image.sh

bash deploy/local/build-images.sh
go build -o bin/sandboxctl ./starter

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
tport=$(free_port) uiport=$(free_port) promport=$(free_port) grafport=$(free_port)
export TEMPORAL_PORT=127.0.0.1:$tport TEMPORAL_UI_PORT=127.0.0.1:$uiport PROMETHEUS_PORT=127.0.0.1:$promport GRAFANA_PORT=127.0.0.1:$grafport
# The data root is bind-mounted at the same path on both sides (docker-compose.yaml).
data=$(mktemp -d /var/tmp/sandboxcore-compose.XXXXXX)
export SANDBOX_DATA_DIR=$data SANDBOX_HOST_ID=compose-smoke SANDBOX_ALLOW_FILE_URLS=1
project=sandboxcore-smoke-$$
dc() { "${COMPOSE[@]}" -p "$project" -f docker-compose.yaml -f deploy/local/docker-compose.local.yaml "$@"; }

ws=""
cleanup() {
  code=$?
  if [ "$code" != 0 ]; then
    echo "test-compose: FAILED; service states and the last log lines:" >&2
    dc ps >&2 || true
    dc logs --tail=40 >&2 || true
  fi
  if [ -n "$ws" ]; then
    docker ps -aq --filter "label=sandboxcore.workspace=$ws" | xargs -r docker rm -f >/dev/null || true
  fi
  dc down -v --remove-orphans >/dev/null 2>&1 || true
  rm -rf --one-file-system "$data"
  exit "$code"
}
trap cleanup EXIT

"${COMPOSE[@]}" -f docker-compose.yaml config -q
dc config -q
log "compose files validate"

dc up -d --no-build worker temporal-ui prometheus
# Health: PostgreSQL and Temporal have healthchecks; the one-shot jobs must
# have exited 0; the worker and the UI must be running.
wait_for() { # what, seconds, command...
  local what=$1 secs=$2; shift 2
  for _ in $(seq 1 "$secs"); do
    if "$@" >/dev/null 2>&1; then log "$what"; return 0; fi
    sleep 1
  done
  echo "test-compose: timed out waiting for $what" >&2
  return 1
}
healthy() { [ "$(docker inspect -f '{{.State.Health.Status}}' "$(dc ps -q "$1")")" = healthy ]; }
exited_ok() { local id; id=$(dc ps -a -q "$1"); [ -n "$id" ] && [ "$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$id")" = "exited 0" ]; }
running() { [ "$(docker inspect -f '{{.State.Running}}' "$(dc ps -q "$1")")" = true ]; }
wait_for "postgresql healthy" 120 healthy postgresql
wait_for "temporal-schema done" 120 exited_ok temporal-schema
wait_for "temporal healthy" 180 healthy temporal
wait_for "temporal-namespace done" 120 exited_ok temporal-namespace
wait_for "worker running" 60 running worker
worker_logs_have() { dc logs worker 2>/dev/null | grep -q "$1"; }
wait_for "worker ready" 120 worker_logs_have 'sandboxcore worker ready'

# The session, through the frontend the stack exposes.
export TEMPORAL_ADDRESS=127.0.0.1:$tport
repo=$data/src/demo
mkdir -p "$repo"
git -C "$repo" init -q -b trunk
git -C "$repo" -c user.name=smoke -c user.email=smoke@example.invalid commit -q --allow-empty -m initial
acq=$(timeout 300 bin/sandboxctl acquire --repo "file://$repo" --user smoke --project compose --mode edit --conversation c1 --json)
ws=$(printf '%s' "$acq" | python3 -c 'import json,sys; print(json.load(sys.stdin)["workspace_id"])')
wt=$(printf '%s' "$acq" | python3 -c 'import json,sys; print(json.load(sys.stdin)["local_path"])')
log "acquired $ws"
out=$(timeout 300 bin/sandboxctl exec "$ws" -- sh -c 'echo hello from $(uname -s)')
[ "$out" = "hello from Linux" ] || { echo "test-compose: exec printed '$out'" >&2; exit 1; }
echo 'written by the smoke test' | timeout 120 bin/sandboxctl write "$ws" notes/smoke.txt
[ "$(cat "$wt/notes/smoke.txt")" = "written by the smoke test" ]
timeout 120 bin/sandboxctl commit "$ws" -m "smoke: a note" >/dev/null
bare=$(dirname "$(dirname "$wt")")/.bare
branch=$(printf '%s' "$acq" | python3 -c 'import json,sys; print(json.load(sys.stdin)["branch"])')
[ "$branch" = "agent/$(printf 'smoke|compose' | sha256sum | cut -c1-16)/edits-c1" ]
[ "$(git --git-dir="$bare" log -1 --format=%s "$branch")" = "smoke: a note" ]
[ "$(git --git-dir="$bare" show "$branch:notes/smoke.txt")" = "written by the smoke test" ]
log "acquire -> exec -> write -> commit ok"

# The Web UI answers and, through its API, lists the session.
curl -fsS "http://127.0.0.1:$uiport/" | grep -qi '<html'
wf=sandbox-session/${ws#ws-}
listed() {
  curl -fsS "http://127.0.0.1:$uiport/api/v1/namespaces/default/workflows?query=WorkflowId%3D%27${wf//\//%2F}%27" | grep -q "$wf"
}
wait_for "web ui lists the session" 30 listed

# Prometheus scrapes both targets and has the session's numbers; every
# dashboard query is valid PromQL there.
prom() { curl -fsS --get "http://127.0.0.1:$promport/api/v1/query" --data-urlencode "query=$1"; }
has_value() { prom "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(0 if r["status"]=="success" and r["data"]["result"] else 1)'; }
wait_for "prometheus scrapes the worker" 90 has_value 'up{job="sandbox-worker"} == 1'
wait_for "prometheus scrapes temporal" 90 has_value 'up{job="temporal"} == 1'
wait_for "prometheus has the exec" 90 has_value 'sandbox_exec_results_total{outcome="ok"} >= 1'
# The SDK's own metrics are on the worker's page too (an exec is the
# local activity sandbox.ExecStart, plus sandbox.Exec when it runs long).
wait_for "prometheus has the SDK's metrics" 30 has_value 'count({job="sandbox-worker",__name__=~"temporal_.+_total"}) >= 1'
python3 - "$promport" deploy/grafana/dashboards/sandboxcore.json <<'PY'
# Every query of the dashboard must be valid PromQL here, and the panels of
# what the smoke session produced (sessions, workspaces, runtimes, operation
# latency, exec outcomes, the Temporal SDK's and server's own metrics) must
# have data. Disk and eviction panels fill after the first scheduled
# eviction run (SANDBOX_EVICTION_INTERVAL), later than this test looks.
import json, sys, time, urllib.parse, urllib.request
port, path = sys.argv[1], sys.argv[2]
dash = json.load(open(path))
needs_data = ("sandbox_sessions", "sandbox_workspaces", "sandbox_runtimes_running", "sandbox_operation_duration_seconds",
              "sandbox_exec_results_total", "temporal_workflow_task_schedule_to_start", "service_requests")
exprs = [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]
def query(expr):
    expr = expr.replace("$__rate_interval", "5m").replace("$__range", "1h").replace("$__interval", "1m")
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        r = json.load(urllib.request.urlopen(url, timeout=10))
    except Exception as e:  # a 400 is an invalid expression
        return False, False, str(e)
    return r.get("status") == "success", bool(r.get("data", {}).get("result")), r
deadline = time.time() + 90
while True:
    bad, empty = [], []
    for title, expr in exprs:
        ok, has, r = query(expr)
        if not ok:
            bad.append(f"{title}: {expr}: {r}")
        elif not has and any(m in expr for m in needs_data):
            empty.append(f"{title}: {expr}")
    if bad or not empty or time.time() > deadline:
        break
    time.sleep(5)
if bad:
    print("test-compose: dashboard queries Prometheus refuses:\n  " + "\n  ".join(bad), file=sys.stderr)
if empty:
    print("test-compose: dashboard panels without data:\n  " + "\n  ".join(empty), file=sys.stderr)
if bad or empty:
    sys.exit(1)
print(f"test-compose: all {len(exprs)} dashboard queries are valid PromQL; the session's panels have data")
PY
log "web ui and prometheus ok"
