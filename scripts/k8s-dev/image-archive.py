#!/usr/bin/env python3
"""Packs a root filesystem folder as a one-layer image in the docker-archive
format (what `docker save` writes and `ctr images import` reads), so that
the dev cluster's real node runs images made on this machine without
Docker or a registry.

  image-archive.py ROOTFS OUT.tar --tag NAME:TAG [--entrypoint JSON]
                   [--cmd JSON] [--env K=V ...] [--user UID:GID] [--workdir DIR]

Files keep their numeric owners and modes; names of owners are dropped and
times are set to 0, so the same folder always gives the same image id.
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tarfile


def layer_of(rootfs: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries = []
        for folder, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                entries.append(os.path.join(folder, name))
        for path in entries:
            info = tar.gettarinfo(path, arcname=os.path.relpath(path, rootfs))
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isfile():
                with open(path, "rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)
    return buffer.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rootfs")
    parser.add_argument("out")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--entrypoint", type=json.loads)
    parser.add_argument("--cmd", type=json.loads)
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--user", default="")
    parser.add_argument("--workdir", default="/")
    args = parser.parse_args()
    if not os.path.isdir(args.rootfs):
        print(f"image-archive: ROOTFS {args.rootfs}: not a folder", file=sys.stderr)
        return 2
    layer = layer_of(args.rootfs)
    layer_digest = hashlib.sha256(layer).hexdigest()
    container = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"] + args.env, "WorkingDir": args.workdir}
    if args.entrypoint:
        container["Entrypoint"] = args.entrypoint
    if args.cmd:
        container["Cmd"] = args.cmd
    if args.user:
        container["User"] = args.user
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "config": container,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created_by": "scripts/k8s-dev/image-archive.py"}],
    }, sort_keys=True).encode()
    config_digest = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{
        "Config": f"{config_digest}.json",
        "RepoTags": [args.tag],
        "Layers": [f"{layer_digest}/layer.tar"],
    }]).encode()
    with tarfile.open(args.out, "w") as archive:
        for name, data in ((f"{layer_digest}/layer.tar", layer), (f"{config_digest}.json", config),
                           ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
