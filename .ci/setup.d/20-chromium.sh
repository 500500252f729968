#!/usr/bin/env bash
# Headless Chromium for the dashboard browser tests (tests/server/test_dashboard.py, marked `browser`).
# Idempotent: does nothing when /usr/bin/chromium is already there. CI runs as root.
# Waits for the dpkg lock rather than failing when another installer runs at the same time.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y chromium
