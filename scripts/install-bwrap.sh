#!/usr/bin/env bash
# Installs bubblewrap (`bwrap`) from the distribution's packages when it is missing: the
# bubblewrap runtime plugin (examples/bubblewrap-runtime) and its tests need it.
# Usage: scripts/install-bwrap.sh        (returns at once when bwrap is on PATH)
set -euo pipefail

if command -v bwrap >/dev/null; then
  exit 0
fi
echo "installing bubblewrap (Debian package) ..." >&2
if [ "$(id -u)" != 0 ]; then
  echo "error: bwrap is missing and this is not root; install it: sudo apt-get install bubblewrap" >&2
  exit 1
fi
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >&2
command -v bwrap >&2
