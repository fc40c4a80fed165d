#!/usr/bin/env bash
# CI: what tests/test_browser.py needs from the system, Debian's Chromium at
# /usr/bin/chromium. Idempotent: does nothing when it is already there. The Python side
# (Playwright, which drives this Chromium and never downloads a browser of its own) is
# pinned in pyproject.toml and installed with the kit.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    echo "ci_browser_setup: /usr/bin/chromium present ($(/usr/bin/chromium --version 2>/dev/null || echo 'version unknown'))"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium
echo "ci_browser_setup: installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
