#!/usr/bin/env bash
# The main job's end-to-end tests again with SANDBOX_RUNTIME_PROVIDER=daytona
# (`make test-e2e-daytona`, part of `make test`), plus the Daytona ones
# (replica recreated, orphans, quota, previews, Daytona's own TypeScript SDK
# against a fake of its own), against the fake Daytona the test binary
# starts when DAYTONA_API_URL is empty (README "Daytona"; each sandbox a
# container of the test image). Skipped, with a message, without a Docker
# daemon or that image, except under CI=true, where that is a failure.
#
#   GO              the go command, as the Makefile names it (split into
#                   words as make splits it)
#   TEST_IMAGE      the image the fake's sandboxes run
#   MAIN_JOB_TESTS, DAYTONA_TESTS
#                   go test -run patterns of those two groups
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:?set by the Makefile: run make test-e2e-daytona}" \
  "${TEST_IMAGE:?set by the Makefile: run make test-e2e-daytona}" \
  "${MAIN_JOB_TESTS:?set by the Makefile: run make test-e2e-daytona}" \
  "${DAYTONA_TESTS:?set by the Makefile: run make test-e2e-daytona}"

if docker image inspect "$TEST_IMAGE" >/dev/null 2>&1; then
  echo "the main job's end-to-end tests on the Daytona runtime (the fake Daytona, $TEST_IMAGE)"
  # shellcheck disable=SC2086 # $GO may carry arguments, as in the Makefile
  SANDBOX_RUNTIME_PROVIDER=daytona DAYTONA_API_URL='' $GO test -count=1 -timeout 20m \
    -run "$MAIN_JOB_TESTS|$DAYTONA_TESTS" ./tests/
elif [ "${CI:-}" = true ]; then
  echo "no Docker daemon or no image $TEST_IMAGE" >&2
  exit 1
else
  echo "skipping the main job on Daytona: no Docker daemon or no image $TEST_IMAGE (.ci/test-image.sh builds it)"
fi
