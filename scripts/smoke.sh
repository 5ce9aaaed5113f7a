#!/usr/bin/env bash
# make smoke-daytona / make smoke-e2b: the scripted smoke check of a remote
# runtime against the REAL service (docs/PRODUCTION.md "Before trusting a
# new service version"): the adapter creates a runtime over a git
# worktree, runs commands, syncs a file each way, stops, starts and
# destroys it (internal/runtime/runtimetest.Smoke; the same script passes
# against the stand-in in make test). Skipped, with a message and exit 0,
# when the service's key is not set. It creates one sandbox on the
# account, and removes it, also when the check fails.
#
#   $1   daytona or e2b
#   GO   the go command, as the Makefile names it
#   daytona: DAYTONA_API_KEY (required), DAYTONA_API_URL, DAYTONA_TARGET
#   e2b:     E2B_API_KEY (required), E2B_API_URL, E2B_TEMPLATE
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:?set by the Makefile: run make smoke-daytona or make smoke-e2b}"
case "${1:-}" in
daytona) key=DAYTONA_API_KEY ;;
e2b) key=E2B_API_KEY ;;
*) echo "usage: $0 daytona|e2b" >&2; exit 2 ;;
esac
if [ -z "${!key:-}" ]; then
	echo "smoke-$1: skipped: $key is not set (this check runs against the real service; see docs/PRODUCTION.md)"
	exit 0
fi
# shellcheck disable=SC2086 # GO may carry flags, split as make splits it
SANDBOX_SMOKE=1 $GO test -count=1 -v -timeout 20m -run '^TestSmoke$' "./internal/runtime/$1/"
