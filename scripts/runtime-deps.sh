#!/usr/bin/env bash
# The host programs of the isolated local runtime, run by `make runtime-deps`
# (which `make run` and `make test` run first): bubblewrap (the runtime `make
# run` and the end-to-end hosts use) and git-lfs (host-side Git LFS fetches).
# Each one missing is installed with apt-get when we may (root, on a machine
# with apt-get), through .ci/apt-get.sh, which waits (at most
# SANDBOX_APT_LOCK_TIMEOUT seconds, default 300) for another apt-get or dpkg
# holding the package locks instead of giving up at once; otherwise this says
# how to install it and goes on (a missing one is not an error here). A
# failed install fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# may_apt: true when packages can be installed here (root, apt-get present).
may_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

if ! command -v bwrap >/dev/null 2>&1; then
  if may_apt; then
    echo "installing bubblewrap (the isolated runtime) with apt-get"
    .ci/apt-get.sh update -qq
    .ci/apt-get.sh install -y -qq bubblewrap
  else
    echo "bubblewrap (bwrap) is not installed: install it (apt-get install bubblewrap), or run"
    echo "with SANDBOX_RUNTIME_PROVIDER=docker (and SANDBOX_RUNTIME_IMAGE) or, without isolation, =local"
  fi
fi

if ! command -v git-lfs >/dev/null 2>&1; then
  if may_apt; then
    echo "installing git-lfs (workspaces fetch Git LFS content with it) with apt-get"
    .ci/apt-get.sh update -qq
    .ci/apt-get.sh install -y -qq git-lfs
  else
    echo "git-lfs is not installed: Git LFS files stay pointers (flagged lfs_pointer); apt-get install git-lfs"
  fi
fi
