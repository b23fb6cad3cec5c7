#!/usr/bin/env python3
"""Writes one single-layer OCI image as an OCI image layout directory (and, with --archive, the same
layout as an oci-archive tarball), with no daemon and no registry. Test bed only (scripts/k8s/images.sh).

    oci.py --out DIR --ref registry.k8s.io/pause:3.10.1 [--archive FILE.tar]
           [--entrypoint JSON] [--cmd JSON] [--env K=V ...] [--workdir /] [--user 0:0]
           [--file SRC:DEST[:MODE] ...] [--tree SRCDIR:DEST ...] [--symlink DEST:TARGET ...] [--dir DEST ...]

The layer tar is reproducible (sorted entries, mtime 0, uid/gid 0, gzip without a timestamp), so the same
inputs give the same digests. index.json names the image twice: `org.opencontainers.image.ref.name` is the
full reference (skopeo: `oci:DIR:REF`), and `io.containerd.image.name` the same (what `ctr images import`
names the image).
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import sys
import tarfile


def add_parents(tar, seen, dest):
    parts = dest.strip("/").split("/")[:-1]
    cur = ""
    for p in parts:
        cur = f"{cur}/{p}" if cur else p
        if cur not in seen:
            ti = tarfile.TarInfo(cur)
            ti.type = tarfile.DIRTYPE
            ti.mode = 0o755
            ti.mtime = 0
            seen[cur] = ti


def build_entries(args):
    """Maps each path in the image (no leading slash) to (TarInfo, source file or None)."""
    entries = {}

    def put(dest, ti, src=None):
        dest = dest.strip("/")
        add_parents(None, entries_dirs, dest)
        ti.name = dest
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        ti.mtime = 0
        entries[dest] = (ti, src)

    entries_dirs = {}
    for d in args.dir:
        ti = tarfile.TarInfo(d)
        ti.type = tarfile.DIRTYPE
        ti.mode = 0o1777 if d.strip("/") == "tmp" else 0o755
        put(d, ti)
    for spec in args.file:
        parts = spec.split(":")
        src, dest = parts[0], parts[1]
        st = os.stat(src)
        mode = int(parts[2], 8) if len(parts) > 2 else stat.S_IMODE(st.st_mode)
        ti = tarfile.TarInfo(dest)
        ti.size = st.st_size
        ti.mode = mode
        put(dest, ti, src)
    for spec in args.tree:
        srcdir, dest = spec.split(":", 1)
        for root, dirs, files in os.walk(srcdir):
            dirs.sort()
            rel = os.path.relpath(root, srcdir)
            base = dest.rstrip("/") + ("" if rel == "." else "/" + rel)
            for name in sorted(dirs + files):
                p = os.path.join(root, name)
                st = os.lstat(p)
                ti = tarfile.TarInfo(base + "/" + name)
                ti.mode = stat.S_IMODE(st.st_mode)
                if stat.S_ISLNK(st.st_mode):
                    ti.type = tarfile.SYMTYPE
                    ti.linkname = os.readlink(p)
                    put(base + "/" + name, ti)
                elif stat.S_ISDIR(st.st_mode):
                    ti.type = tarfile.DIRTYPE
                    put(base + "/" + name, ti)
                elif stat.S_ISREG(st.st_mode):
                    ti.size = st.st_size
                    put(base + "/" + name, ti, p)
    for spec in args.symlink:
        dest, target = spec.split(":", 1)
        ti = tarfile.TarInfo(dest)
        ti.type = tarfile.SYMTYPE
        ti.linkname = target
        ti.mode = 0o777
        put(dest, ti)
    for d, ti in entries_dirs.items():
        if d not in entries:
            ti.uid = ti.gid = 0
            entries[d] = (ti, None)
    return entries


def write_blob(blobs, data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    return "sha256:" + digest, len(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--archive")
    ap.add_argument("--entrypoint")
    ap.add_argument("--cmd")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--workdir", default="/")
    ap.add_argument("--user", default="")
    ap.add_argument("--file", action="append", default=[])
    ap.add_argument("--tree", action="append", default=[])
    ap.add_argument("--symlink", action="append", default=[])
    ap.add_argument("--dir", action="append", default=[])
    ap.add_argument("--created", default="1970-01-01T00:00:00Z")
    args = ap.parse_args()

    entries = build_entries(args)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(entries):
            ti, src = entries[name]
            if src is None:
                tar.addfile(ti)
            else:
                with open(src, "rb") as f:
                    tar.addfile(ti, f)
    raw_bytes = raw.getvalue()
    diff_id = "sha256:" + hashlib.sha256(raw_bytes).hexdigest()
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", compresslevel=1, mtime=0, filename="") as g:
        g.write(raw_bytes)
    layer_bytes = gz.getvalue()

    tmp = args.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    blobs = os.path.join(tmp, "blobs", "sha256")
    os.makedirs(blobs)
    layer_digest, layer_size = write_blob(blobs, layer_bytes)

    cfg = {"Env": args.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
           "WorkingDir": args.workdir}
    if args.entrypoint:
        cfg["Entrypoint"] = json.loads(args.entrypoint)
    if args.cmd:
        cfg["Cmd"] = json.loads(args.cmd)
    if args.user:
        cfg["User"] = args.user
    config = {
        "created": args.created,
        "architecture": "amd64",
        "os": "linux",
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": args.created, "created_by": "clusterctl scripts/k8s/oci.py"}],
    }
    config_digest, config_size = write_blob(blobs, json.dumps(config, sort_keys=True, separators=(",", ":")).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": layer_size}],
    }
    manifest_digest, manifest_size = write_blob(blobs, json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest_size,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"org.opencontainers.image.ref.name": args.ref, "io.containerd.image.name": args.ref},
        }],
    }
    with open(os.path.join(tmp, "index.json"), "w") as f:
        json.dump(index, f, sort_keys=True, separators=(",", ":"))
    with open(os.path.join(tmp, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)

    if args.archive:
        atmp = args.archive + ".tmp"
        with tarfile.open(atmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for root, dirs, files in os.walk(tmp):
                dirs.sort()
                for name in sorted(dirs + files):
                    p = os.path.join(root, name)
                    arc = os.path.relpath(p, tmp)
                    ti = tar.gettarinfo(p, arc)
                    ti.uid = ti.gid = 0
                    ti.uname = ti.gname = ""
                    ti.mtime = 0
                    if ti.isreg():
                        with open(p, "rb") as f:
                            tar.addfile(ti, f)
                    else:
                        tar.addfile(ti)
        os.replace(atmp, args.archive)
    shutil.rmtree(args.out, ignore_errors=True)
    os.replace(tmp, args.out)
    print(f"{args.ref} {manifest_digest} layer={layer_size}B", file=sys.stderr)


if __name__ == "__main__":
    main()
