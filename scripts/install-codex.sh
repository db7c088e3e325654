#!/usr/bin/env bash
# Installs the real OpenAI Codex CLI for the tests, from the PyPI wheel that bundles it.
#
# The openai-codex-cli-bin wheel carries the native binary and what it runs beside it, in
# codex_cli_bin/: bin/codex, codex-resources/bwrap (the bubblewrap codex's own Linux sandbox
# uses, looked up at ../codex-resources/ from the binary), codex-path/rg and
# codex-package.json. The whole tree is installed, its layout kept. The version is pinned:
# the tests assert facts measured on this exact release (codex-facts.md). The binary is
# ~300 MB and is never committed.
#
# Usage: scripts/install-codex.sh [DEST_DIR]    (default: target/tools/codex)
# Prints the path of the installed binary on its last line.
set -euo pipefail

CODEX_VERSION=0.163.0

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/target/tools/codex}
binary=$dest/bin/codex

if [ -x "$binary" ] && [ -x "$dest/codex-resources/bwrap" ] \
  && "$binary" --version 2>/dev/null | grep -qx "codex-cli $CODEX_VERSION"; then
  echo "$binary"
  exit 0
fi

# A fresh machine may have no python3 or pip: take them from Debian's packages (as the
# image script takes mmdebstrap), or say how.
if ! python3 -m pip --version >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "error: python3 with pip is needed to fetch the Codex CLI from PyPI; install it (Debian: apt-get install python3-pip)" >&2
    exit 1
  fi
  echo "installing python3-pip (Debian package) ..." >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-pip >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "installing the Codex CLI $CODEX_VERSION (openai-codex-cli-bin from PyPI) into $dest" >&2
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --platform manylinux_2_17_x86_64 --python-version 3.11 \
  "openai-codex-cli-bin==$CODEX_VERSION" -d "$work" >&2
# Unpacked beside the destination, then moved into place whole: an interrupted install
# never leaves a tree that looks installed.
python3 - "$work" "$dest" <<'PY'
import glob, os, shutil, sys, zipfile
work, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(work, "openai_codex_cli_bin-*.whl"))[0]
prefix = "codex_cli_bin/"
partial = dest.rstrip("/") + ".partial"
shutil.rmtree(partial, ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith(prefix) or name.endswith("/") or "/__pycache__/" in name:
            continue
        rel = name[len(prefix):]
        if rel == "__init__.py" or ".." in rel.split("/"):
            continue
        out = os.path.join(partial, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        # The wheel keeps each file's mode in its external attributes; executables stay so.
        mode = (info.external_attr >> 16) & 0o777
        os.chmod(out, 0o755 if mode & 0o111 or rel.startswith(("bin/", "codex-resources/", "codex-path/")) else 0o644)
for needed in ("bin/codex", "codex-resources/bwrap", "codex-package.json"):
    if not os.path.isfile(os.path.join(partial, needed)):
        sys.exit("the wheel has no codex_cli_bin/" + needed)
shutil.rmtree(dest, ignore_errors=True)
os.makedirs(os.path.dirname(dest.rstrip("/")), exist_ok=True)
os.replace(partial, dest)
PY
got=$("$binary" --version)
if [ "$got" != "codex-cli $CODEX_VERSION" ]; then
  echo "expected the Codex CLI $CODEX_VERSION, got: $got" >&2
  exit 1
fi
echo "$binary"
