#!/usr/bin/env bash
# Builds stet's lane image, `stet-lane:1`, with no registry: a Debian bookworm minbase
# root file system (bash, coreutils, git, ca-certificates) made by mmdebstrap from Debian's
# package mirror, wrapped into a docker-archive with fixed timestamps and loaded with
# `docker load`. For the same mirror state the tarball and the image ID are identical on
# every run (SOURCE_DATE_EPOCH, sorted tar, created = 1970-01-01).
#
# The image has no environment, entrypoint or command of its own: stet gives sandboxes
# their environment from scratch and runs its own processes.
#
# Usage: scripts/build-image.sh [--force] [TAG]      (default tag: stet-lane:1)
# Needs: root (or an apt that can install mmdebstrap), docker, python3.
set -euo pipefail

force=0
if [ "${1:-}" = "--force" ]; then force=1; shift; fi
tag=${1:-stet-lane:1}

if [ $force = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag is already loaded (use --force to rebuild)" >&2
  exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
  echo "installing mmdebstrap (Debian package) ..." >&2
  if [ "$(id -u)" != 0 ]; then
    echo "error: mmdebstrap is missing and this is not root; install it: sudo apt-get install mmdebstrap" >&2
    exit 1
  fi
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "building the root file system (mmdebstrap, about 30 s) ..." >&2
SOURCE_DATE_EPOCH=1700000000 mmdebstrap \
  --quiet --variant=minbase --include=git,ca-certificates \
  --dpkgopt=force-unsafe-io \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  bookworm "$work/rootfs.tar" >&2

python3 - "$work" "$tag" <<'PY'
import hashlib, io, json, os, sys, tarfile
work, tag = sys.argv[1], sys.argv[2]
layer = os.path.join(work, "rootfs.tar")
digest = hashlib.sha256()
with open(layer, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
diff_id = "sha256:" + digest.hexdigest()
config = {
    "architecture": "amd64" if os.uname().machine == "x86_64" else "arm64",
    "os": "linux",
    "created": "1970-01-01T00:00:00Z",
    "config": {},
    "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "scripts/build-image.sh (mmdebstrap bookworm minbase + git)"}],
}
config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
layer_name = digest.hexdigest() + "/layer.tar"
manifest = json.dumps([{"Config": config_name, "RepoTags": [tag], "Layers": [layer_name]}]).encode()
with tarfile.open(os.path.join(work, "image.tar"), "w", format=tarfile.USTAR_FORMAT) as out:
    def add_bytes(name, data):
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), 0, 0o644
        out.addfile(info, io.BytesIO(data))
    add_bytes(config_name, config_bytes)
    info = out.gettarinfo(layer, arcname=layer_name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    with open(layer, "rb") as f:
        out.addfile(info, f)
    add_bytes("manifest.json", manifest)
PY
docker load --quiet --input "$work/image.tar" >&2
echo "loaded $tag: $(docker image inspect --format '{{.Id}}' "$tag")" >&2
