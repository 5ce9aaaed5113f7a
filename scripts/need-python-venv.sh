#!/usr/bin/env bash
# Makes sure `$PYTHON -m venv` works before `make python-venv` creates
# python/.venv with it (the Makefile's python/.venv/.installed recipe runs
# this first): when the venv module is missing, installs python3-venv with
# apt-get if we may (root, on a machine with apt-get; .ci/apt-get.sh waits
# for another apt-get or dpkg holding the locks), else fails saying how.
#
#   PYTHON  the interpreter, as the Makefile names it (default python3); a
#           command with arguments is split into words as make splits it
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# shellcheck disable=SC2086 # $PYTHON may carry arguments, as in the Makefile
if ! $PYTHON -m venv --help >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing python3-venv with apt-get"
    .ci/apt-get.sh update -qq
    .ci/apt-get.sh install -y -qq python3-venv
  else
    echo "python3 -m venv is missing: apt-get install python3-venv" >&2
    exit 1
  fi
fi
