#!/usr/bin/env bash
# Installs gVisor's runsc, pinned, from Debian's packages when a usable one is missing:
# the gvisor runtime plugin (plugins/gvisor) and its tests need it.
#
# Debian 12 (bookworm) carries runsc 20221219, which refuses the statx calls current
# coreutils make (ls and stat fail in its sandboxes); bookworm-backports carries
# 20240729, which the plugin takes. This adds bookworm-backports to apt's sources (a file
# of its own, /etc/apt/sources.list.d/stet-bookworm-backports.list) and installs that
# version. On other systems, install a runsc of 2023-06 or later yourself.
#
# Usage: scripts/install-runsc.sh       (returns at once when the pinned runsc is there)
set -euo pipefail

version=0.0~20240729.0-4~bpo12+2

if command -v runsc >/dev/null && [ "$(dpkg-query -W -f='${Version}' runsc 2>/dev/null)" = "$version" ]; then
  exit 0
fi
if ! grep -qs '^VERSION_CODENAME=bookworm' /etc/os-release; then
  if command -v runsc >/dev/null; then
    echo "runsc is installed (not from bookworm-backports); the gvisor plugin's probe checks its release" >&2
    exit 0
  fi
  echo "error: runsc is missing; install gVisor's runsc (2023-06 or later) from your distribution or gvisor.dev" >&2
  exit 1
fi
echo "installing runsc $version (Debian bookworm-backports) ..." >&2
if [ "$(id -u)" != 0 ]; then
  echo "error: runsc $version is missing and this is not root; install it: sudo apt-get install -t bookworm-backports runsc=$version" >&2
  exit 1
fi
list=/etc/apt/sources.list.d/stet-bookworm-backports.list
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo 'deb http://deb.debian.org/debian bookworm-backports main' > "$list"
fi
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  -t bookworm-backports "runsc=$version" >&2
runsc --version >&2
