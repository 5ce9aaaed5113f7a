#!/usr/bin/env bash
# The main job's end-to-end tests again with SANDBOX_RUNTIME_PROVIDER=docker
# (`make test-e2e-docker`, part of `make test`), plus the tests of background
# processes and cancel (the remote runtimes have no processes) and of what
# a runtime that mounts the worktree does (prepared trees, a repository's
# image), on the image .ci/test-image.sh builds. Skipped, with a message,
# without a Docker daemon or that image, except under CI=true, where that
# is a failure.
#
#   GO                the go command, as the Makefile names it (split into
#                     words as make splits it)
#   TEST_IMAGE        the image every runtime runs
#   MAIN_JOB_TESTS, PROCESS_TESTS, HOST_MOUNT_TESTS
#                     go test -run patterns of those three groups
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:?set by the Makefile: run make test-e2e-docker}" \
  "${TEST_IMAGE:?set by the Makefile: run make test-e2e-docker}" \
  "${MAIN_JOB_TESTS:?set by the Makefile: run make test-e2e-docker}" \
  "${PROCESS_TESTS:?set by the Makefile: run make test-e2e-docker}" \
  "${HOST_MOUNT_TESTS:?set by the Makefile: run make test-e2e-docker}"

if docker image inspect "$TEST_IMAGE" >/dev/null 2>&1; then
  echo "the main job's end-to-end tests on the Docker runtime ($TEST_IMAGE)"
  # shellcheck disable=SC2086 # $GO may carry arguments, as in the Makefile
  SANDBOX_RUNTIME_PROVIDER=docker SANDBOX_RUNTIME_IMAGE=$TEST_IMAGE $GO test -count=1 -timeout 15m \
    -run "$MAIN_JOB_TESTS|$PROCESS_TESTS|$HOST_MOUNT_TESTS" ./tests/
elif [ "${CI:-}" = true ]; then
  echo "no Docker daemon or no image $TEST_IMAGE" >&2
  exit 1
else
  echo "skipping the main job on Docker: no daemon or no image $TEST_IMAGE (.ci/test-image.sh builds it)"
fi
