#!/usr/bin/env bash
# The main job's end-to-end tests again with SANDBOX_RUNTIME_PROVIDER=e2b
# (`make test-e2e-e2b`, part of `make test`) against the E2B stand-in
# (internal/runtime/e2b/e2bfake: its sandboxes are containers of the test
# image): built and started here, its address and API key (the lines it
# prints, E2B_...=...) exported to the tests, stopped after them. Skipped,
# with a message, without a Docker daemon or the image, except under
# CI=true, where that is a failure. Exits with the tests' status, or 3 when
# they passed but the stand-in did not exit cleanly (it reports the spec
# violations it saw that way).
#
#   GO              the go command, as the Makefile names it (split into
#                   words as make splits it)
#   TEST_IMAGE      the image the stand-in's sandboxes run
#   MAIN_JOB_TESTS  go test -run pattern of the main job's tests
#   E2BFAKE         where to build the stand-in (bin/e2bfake)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:?set by the Makefile: run make test-e2e-e2b}" \
  "${TEST_IMAGE:?set by the Makefile: run make test-e2e-e2b}" \
  "${MAIN_JOB_TESTS:?set by the Makefile: run make test-e2e-e2b}" \
  "${E2BFAKE:?set by the Makefile: run make test-e2e-e2b}"

if docker image inspect "$TEST_IMAGE" >/dev/null 2>&1; then
  echo "the main job's end-to-end tests on the E2B runtime (the fake E2B, $TEST_IMAGE)"
  # shellcheck disable=SC2086 # $GO may carry arguments, as in the Makefile
  $GO build -o "$E2BFAKE" ./internal/runtime/e2b/e2bfake || exit 1
  out=$(mktemp)
  "./$E2BFAKE" -addr 127.0.0.1:0 -image "$TEST_IMAGE" >"$out" &
  pid=$!
  # Wait (at most 60 s) for its settings, unless it exits first.
  for _ in $(seq 1 300); do
    grep -q '^E2B_API_KEY=' "$out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if ! grep -q '^E2B_API_KEY=' "$out"; then
    echo "the fake E2B did not start" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
  fi
  set -a
  # shellcheck disable=SC1090 # the stand-in's VAR=value lines
  . "$out"
  set +a
  rc=0
  # shellcheck disable=SC2086 # $GO may carry arguments, as in the Makefile
  SANDBOX_RUNTIME_PROVIDER=e2b $GO test -count=1 -timeout 20m -run "$MAIN_JOB_TESTS" ./tests/ || rc=$?
  kill "$pid" || true
  if ! wait "$pid" && [ "$rc" = 0 ]; then
    rc=3
  fi
  rm -f "$out"
  exit "$rc"
elif [ "${CI:-}" = true ]; then
  echo "no Docker daemon or no image $TEST_IMAGE" >&2
  exit 1
else
  echo "skipping the main job on E2B: no daemon or no image $TEST_IMAGE (.ci/test-image.sh builds it)"
fi
