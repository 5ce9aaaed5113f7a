#!/usr/bin/env bash
# make smoke-daytona / make smoke-e2b: the scripted smoke check of a remote
# runtime against the REAL service (docs/PRODUCTION.md "Before trusting a
# new service version"): the adapter creates a runtime over a git
# worktree, runs commands, syncs a file each way, stops, starts and
# destroys it (internal/runtime/runtimetest.Smoke; the same script passes
# against the stand-in in make test), then the vendor's own TypeScript SDK
# runs its scripted flow (tests/vendorsdk/<kind>.mjs, which make test runs
# against the stand-in). Skipped, with a message and exit 0,
# when the service's key is not set. Each part creates one sandbox on the
# account and removes it.
#
#   $1   daytona or e2b
#   GO   the go command, as the Makefile names it
#   daytona: DAYTONA_API_KEY or DAYTONA_API_KEY_FILE (required),
#            DAYTONA_API_URL (default https://app.daytona.io/api), DAYTONA_TARGET
#   e2b:     E2B_API_KEY or E2B_API_KEY_FILE (required), E2B_API_URL, E2B_TEMPLATE
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:?set by the Makefile: run make smoke-daytona or make smoke-e2b}"
case "${1:-}" in
daytona) key=DAYTONA_API_KEY ;;
e2b) key=E2B_API_KEY ;;
*) echo "usage: $0 daytona|e2b" >&2; exit 2 ;;
esac
file="${key}_FILE"
if [ -z "${!key:-}" ] && [ -n "${!file:-}" ]; then
	# The key in a file, as the worker takes it (README "Configuration").
	if [ ! -r "${!file}" ]; then
		echo "smoke-$1: $file names ${!file}, which cannot be read" >&2
		exit 2
	fi
	printf -v "$key" '%s' "$(tr -d '\r\n' < "${!file}")"
	if [ -z "${!key}" ]; then
		echo "smoke-$1: $file names ${!file}, which is empty" >&2
		exit 2
	fi
	export "${key?}"
fi
if [ -z "${!key:-}" ]; then
	echo "smoke-$1: skipped: neither $key nor $file is set (this check runs against the real service; see docs/PRODUCTION.md)"
	exit 0
fi
if [ "$1" = daytona ] && [ -z "${DAYTONA_API_URL:-}" ]; then
	export DAYTONA_API_URL=https://app.daytona.io/api
	echo "smoke-daytona: DAYTONA_API_URL is not set: using $DAYTONA_API_URL (Daytona's cloud)"
fi
# Our adapter first, then the vendor's own SDK (tests/vendorsdk: the
# script make test runs against the stand-in), both against the service.
# shellcheck disable=SC2086 # GO may carry flags, split as make splits it
SANDBOX_SMOKE=1 $GO test -count=1 -v -timeout 20m -run '^TestSmoke$' "./internal/runtime/$1/"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "smoke-$1: the vendor SDK's script skipped: no node and npm here"
	exit 0
fi
[ -d tests/vendorsdk/node_modules ] || npm ci --prefix tests/vendorsdk --no-audit --no-fund
(cd tests/vendorsdk && node "$1.mjs")
