#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# check_oci.py ARCHIVE NAME VERSION: checks an image archive from scripts/image-oci (make
# image) the way a runtime reads it: oci-layout and index.json name the image (OCI ref.name
# and containerd's io.containerd.image.name), every blob's digest and size match, the
# config's diff_id is the uncompressed layer's digest, the labels carry the version, the
# entrypoint and env are the Dockerfile's, the layer holds /usr/bin/gpuslice and its links,
# and Docker's manifest.json points at the same config and layer. Prints the manifest digest.
import gzip
import hashlib
import io
import json
import sys
import tarfile


def fail(msg):
    sys.exit("FAIL: check_oci: " + msg)


def main():
    path, name, version = sys.argv[1:4]
    with tarfile.open(path) as t:
        files = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
    if json.loads(files["oci-layout"]) != {"imageLayoutVersion": "1.0.0"}:
        fail("oci-layout")

    def blob(desc):
        data = files.get("blobs/sha256/" + desc["digest"][7:])
        if data is None:
            fail("missing blob %s" % desc["digest"])
        if "sha256:" + hashlib.sha256(data).hexdigest() != desc["digest"]:
            fail("digest mismatch for %s" % desc["digest"])
        if len(data) != desc["size"]:
            fail("size mismatch for %s" % desc["digest"])
        return data

    index = json.loads(files["index.json"])
    if len(index["manifests"]) != 1:
        fail("index has %d manifests" % len(index["manifests"]))
    desc = index["manifests"][0]
    ann = desc.get("annotations", {})
    if ann.get("org.opencontainers.image.ref.name") != name or \
            ann.get("io.containerd.image.name") != name:
        fail("index names %s, not %s" % (ann, name))
    manifest = json.loads(blob(desc))
    if manifest["mediaType"] != "application/vnd.oci.image.manifest.v1+json":
        fail("manifest media type")
    config = json.loads(blob(manifest["config"]))
    layers = manifest["layers"]
    if len(layers) != 1 or not layers[0]["mediaType"].endswith("tar+gzip"):
        fail("layers %s" % layers)
    raw = gzip.decompress(blob(layers[0]))
    if config["rootfs"]["diff_ids"] != ["sha256:" + hashlib.sha256(raw).hexdigest()]:
        fail("diff_id is not the uncompressed layer's digest")
    labels = config["config"]["Labels"]
    if labels.get("org.opencontainers.image.version") != version:
        fail("version label %r, not %r" % (labels.get("org.opencontainers.image.version"),
                                           version))
    if config["config"]["Entrypoint"] != ["nvidia-device-plugin"]:
        fail("entrypoint %s" % config["config"]["Entrypoint"])
    env = config["config"]["Env"]
    for want in ("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"):
        if want not in env:
            fail("env lacks %s" % want)
    if desc.get("platform", {}).get("architecture") != config["architecture"]:
        fail("index platform and config architecture differ")
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        members = {m.name: m for m in t.getmembers()}
    gp = members.get("usr/bin/gpuslice")
    if not gp or not gp.isfile() or not gp.mode & 0o111:
        fail("no executable usr/bin/gpuslice in the layer")
    link = members.get("usr/bin/nvidia-device-plugin")
    if not link or not link.issym() or link.linkname != "gpuslice":
        fail("usr/bin/nvidia-device-plugin is not a link to gpuslice")
    if any(m.uid or m.gid for m in members.values()):
        fail("files not owned by root in the layer")
    docker = json.loads(files["manifest.json"])
    if docker[0]["RepoTags"] != [name] or \
            docker[0]["Config"] != "blobs/sha256/" + manifest["config"]["digest"][7:] or \
            docker[0]["Layers"] != ["blobs/sha256/" + layers[0]["digest"][7:]]:
        fail("manifest.json does not match the OCI manifest")
    print(desc["digest"])


if __name__ == "__main__":
    main()
