#!/usr/bin/env bash
# Installs Chromium and its WebDriver server (`chromedriver`) from Debian's packages when
# either is missing: the board's tests drive a real headless browser, and
# `cargo xtask screenshots` takes the docs' pictures with it.
# Usage: scripts/install-chromium.sh     (returns at once when both are on PATH)
set -euo pipefail

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
echo "installing chromium and chromium-driver (Debian packages, about 1 minute) ..." >&2
if [ "$(id -u)" != 0 ]; then
  echo "error: chromium or chromedriver is missing and this is not root; install them: sudo apt-get install chromium chromium-driver" >&2
  exit 1
fi
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2
command -v chromium chromedriver >&2
