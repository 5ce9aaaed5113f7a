#!/usr/bin/env bash
# Runs every fuzz target for a fixed number of executions (`make fuzz`, part
# of `make test`; docs/SECURITY.md "Fuzzing"), starting from the seed corpora
# under testdata/fuzz. Counts, not durations: a duration-based -fuzztime can
# fail with a spurious "context deadline exceeded" at its end on Go 1.26
# (https://github.com/golang/go/issues/75804). The first failing target
# stops the run.
#
#   GO         the go command, as the Makefile names it (a command with
#              arguments is split into words as make splits it)
#   FUZZSCALE  an integer multiplying every count
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:?set by the Makefile: run make fuzz}" "${FUZZSCALE:?set by the Makefile: run make fuzz}"

# package:target:executions, in the order they run.
for spec in \
  ./sandboxapi/:FuzzParseRepoURL:100000 \
  ./sandboxapi/:FuzzValidateRef:200000 \
  ./sandboxapi/:FuzzValidateID:200000 \
  ./sandboxapi/:FuzzCleanRelPath:100000 \
  ./internal/workspace/:FuzzConfinement:30000 \
  ./payloadcodec/:FuzzDecode:30000; do
  IFS=: read -r pkg target count <<<"$spec"
  n=$(( count * FUZZSCALE ))
  echo "fuzz $target ($n executions)"
  # shellcheck disable=SC2086 # $GO may carry arguments, as in the Makefile
  $GO test -run '^$' -fuzz "^${target}\$" -fuzztime "${n}x" "$pkg"
done
