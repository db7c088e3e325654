#!/usr/bin/env bash
# Installs the real Claude Code CLI for the tests, from the PyPI wheel that bundles it.
#
# The claude-agent-sdk wheel carries the native binary at claude_agent_sdk/_bundled/claude.
# The version is pinned: the tests assert facts measured on this exact release
# (see ../shared/ref/claude-code.md). The binary is ~400 MB and is never committed.
#
# Usage: scripts/install-claude.sh [DEST_DIR]    (default: target/tools/claude)
# Prints the path of the installed binary on its last line.
set -euo pipefail

SDK_VERSION=0.2.189
CLAUDE_VERSION=2.1.332

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/target/tools/claude}
binary=$dest/claude

if [ -x "$binary" ] && "$binary" --version 2>/dev/null | grep -q "^$CLAUDE_VERSION "; then
  echo "$binary"
  exit 0
fi

# A fresh machine may have no python3 or pip: take them from Debian's packages (as the
# image script takes mmdebstrap), or say how.
if ! python3 -m pip --version >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "error: python3 with pip is needed to fetch Claude Code from PyPI; install it (Debian: apt-get install python3-pip)" >&2
    exit 1
  fi
  echo "installing python3-pip (Debian package) ..." >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-pip >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "installing Claude Code $CLAUDE_VERSION (claude-agent-sdk $SDK_VERSION from PyPI) into $dest" >&2
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --platform manylinux_2_17_x86_64 --python-version 3.11 \
  "claude-agent-sdk==$SDK_VERSION" -d "$work" >&2
python3 - "$work" "$dest" <<'PY'
import glob, os, sys, zipfile
work, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(work, "claude_agent_sdk-*.whl"))[0]
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    data = z.read("claude_agent_sdk/_bundled/claude")
tmp = os.path.join(dest, "claude.partial")
with open(tmp, "wb") as f:
    f.write(data)
os.chmod(tmp, 0o755)
os.replace(tmp, os.path.join(dest, "claude"))
PY
got=$("$binary" --version)
case "$got" in
  "$CLAUDE_VERSION "*) ;;
  *) echo "expected Claude Code $CLAUDE_VERSION, got: $got" >&2; exit 1 ;;
esac
echo "$binary"
