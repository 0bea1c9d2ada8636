#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_image_rootfs.sh SOURCE_DIR BUILD_DIR: builds the image's runtime root filesystem
# (scripts/image-rootfs, the Dockerfile's package list) and runs gpuslice inside it with
# chroot: the dynamic loader finds every library; no libnvidia-ml in the image; every NVIDIA
# name answers --help;
# --version; `plan` and a short `device-plugin` run against the fake NVML placed under
# /driver-root as the host driver would be mounted, with kubelet-sim copied in; the plugin
# started as the image's ENTRYPOINT with the args of NVIDIA's static manifests; the rootfs
# packed as the OCI archive `make image` writes (scripts/image-oci), checked and loaded.
# Needs root (chroot) and apt; without them it exits 77 (CTest: skipped) and says why.
set -uo pipefail

src=$1
build=$2
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root for chroot (CI runs as root)"
command -v chroot >/dev/null || skip "chroot not installed"
# the build says so (GS_SANITIZE from CMake); ldd as a second opinion when run by hand
case "${GS_SANITIZE_BUILD:-}" in ON|on|1|TRUE|true)
    skip "a sanitizer build: the image carries a release binary (make test runs this)";; esac
ldd "$build/gpuslice" 2>/dev/null | grep -qE 'lib(a|ub|t)san' &&
    skip "a sanitizer build: the image carries a release binary (make test runs this)"
out=$build/rootfs-test
"$src/scripts/image-rootfs" "$build" "$out"
rc=$?
[ $rc = 77 ] && skip "the rootfs cannot be built here (apt cannot download)"
[ $rc = 0 ] || fail "scripts/image-rootfs exited $rc"

mounted=
cleanup() {
    [ -n "${sim_pid:-}" ] && kill "$sim_pid" 2>/dev/null
    [ -n "${dp_pid:-}" ] && kill "$dp_pid" 2>/dev/null
    wait 2>/dev/null
    [ -n "$mounted" ] && umount "$out/proc" 2>/dev/null
    rm -rf "$out"
}
trap cleanup EXIT
in_root() { chroot "$out" "$@"; }

# 1. nothing NVIDIA in the image; the loader resolves every library of the binary
found=$(find "$out" -name 'libnvidia-ml*' | head -1)
[ -z "$found" ] || fail "libnvidia-ml in the image: $found"
list=$(in_root /lib64/ld-linux-x86-64.so.2 --list /usr/bin/gpuslice 2>&1) || fail "ld.so --list: $list"
grep -q 'not found' <<<"$list" && fail "missing libraries in the image: $list"
echo "ok: ld.so finds $(grep -c '=>' <<<"$list") libraries, none missing; no libnvidia-ml"
# libcurl is dlopened, not linked: check it resolves too
list=$(in_root /lib64/ld-linux-x86-64.so.2 --list /usr/lib/x86_64-linux-gnu/libcurl.so.4 2>&1) ||
    fail "libcurl.so.4 not loadable: $list"
grep -q 'not found' <<<"$list" && fail "libcurl's libraries missing: $list"

# 2. every name
ver=$(in_root gpuslice --version 2>&1) || fail "gpuslice --version: $ver"
grep -qE '^gpuslice [0-9]' <<<"$ver" || fail "gpuslice --version printed '$ver'"
echo "ok: $ver"
while read -r name; do
    [ -z "$name" ] || [ "${name#\#}" != "$name" ] && continue
    o=$(in_root "$name" --help 2>&1)
    rc=$?
    if [ $rc = 0 ]; then
        echo "ok: $name --help"
    else
        fail "$name --help exited $rc: $o"
    fi
done <"$src/deployments/container/links.txt"
# every argv[0] alias gpuslice knows is linked in the image
for a in $("$build/gpuslice" help | awk '/= gpuslice/{print $1}'); do
    grep -qx "$a" "$src/deployments/container/links.txt" || fail "alias $a missing from links.txt"
done

# 2b. `make image`: the same rootfs packed as an OCI archive (scripts/image-oci), checked as
# a runtime reads it, packed twice to the same digest; loaded by podman when it is installed
# (make e2e loads it with containerd's ctr)
ver=$(awk '/^project.gpuslice VERSION/ {print $3}' "$src/CMakeLists.txt")
img=$build/rootfs-test.tar
"$src/scripts/image-oci" "$out" "$img" --name "localhost/gpuslice:$ver" --version "$ver" \
    --revision test >/dev/null || fail "scripts/image-oci failed"
d1=$(python3 "$src/tests/deploy/check_oci.py" "$img" "localhost/gpuslice:$ver" "$ver") ||
    fail "the OCI archive: $d1"
"$src/scripts/image-oci" "$out" "$img" --name "localhost/gpuslice:$ver" --version "$ver" \
    --revision test >/dev/null || fail "scripts/image-oci failed"
d2=$(python3 "$src/tests/deploy/check_oci.py" "$img" "localhost/gpuslice:$ver" "$ver")
[ "$d1" = "$d2" ] || fail "the same rootfs packed twice gave $d1 and $d2"
echo "ok: OCI archive localhost/gpuslice:$ver $d1 (reproducible; version label, entrypoint, blobs)"
if command -v podman >/dev/null; then
    pd=$(mktemp -d)
    o=$(podman --root "$pd/root" --runroot "$pd/run" --storage-driver vfs load -i "$img" 2>&1) ||
        { rm -rf "$pd"; fail "podman load: $o"; }
    lab=$(podman --root "$pd/root" --runroot "$pd/run" --storage-driver vfs image inspect \
        --format '{{index .Labels "org.opencontainers.image.version"}}' "localhost/gpuslice:$ver" 2>&1)
    rm -rf "$pd"
    [ "$lab" = "$ver" ] || fail "podman: version label '$lab' after load: $o"
    echo "ok: podman load: localhost/gpuslice:$ver, version label $lab"
fi
rm -f "$img"

# 3. the fake NVML where the chart's /driver-root mount puts the host driver
lib=$out/driver-root/usr/lib/x86_64-linux-gnu
mkdir -p "$lib" "$out/test"
cp "$build/tools/fake-nvml/libnvidia-ml.so.1" "$lib/"
cp "$src/examples/machines/l20-node.yaml" "$out/test/machine.yaml"
cp "$build/tools/kubelet-sim/kubelet-sim" "$out/test/"
mount -t proc proc "$out/proc" 2>/dev/null && mounted=1
export FAKE_NVML_MACHINE=/test/machine.yaml FAKE_NVML_STATE=/test/nvml.state
unset GPUSLICE_NVML_LIBRARY CONFIG_FILE NODE_NAME KUBECONFIG
plan=$(in_root gpuslice plan 2>&1) || fail "gpuslice plan: $plan"
grep -q 'nvidia.com/gpu' <<<"$plan" || fail "gpuslice plan did not list nvidia.com/gpu: $plan"
echo "ok: gpuslice plan found NVML under /driver-root"

# 4. a short device-plugin run, kubelet-sim as the kubelet, both inside the rootfs
dir=/var/lib/kubelet/device-plugins
chroot "$out" /test/kubelet-sim --dir $dir --wait-resources 1 --capacity --timeout-ms 15000 -o json \
    >"$build/rootfs-test.sim" 2>&1 &
sim_pid=$!
for _ in $(seq 1 500); do [ -S "$out$dir/kubelet.sock" ] && break; sleep 0.02; done
[ -S "$out$dir/kubelet.sock" ] || fail "kubelet-sim did not create kubelet.sock"
# as the runtime starts it for NVIDIA's static manifests: the image's ENTRYPOINT plus their
# args (--pod-resources-socket "": no kubelet pod-resources here)
mapfile -t entry < <(sed -n 's/^ENTRYPOINT \["\(.*\)"\]$/\1/p' "$src/deployments/container/Dockerfile" |
    sed 's/", "/\n/g')
[ "${#entry[@]}" -gt 0 ] || fail "no ENTRYPOINT in the Dockerfile"
chroot "$out" "${entry[@]}" --fail-on-init-error=false --pod-resources-socket "" \
    >"$build/rootfs-test.dp" 2>&1 &
dp_pid=$!
wait "$sim_pid"
rc=$?
sim_pid=
[ $rc = 0 ] || fail "kubelet-sim: $(cat "$build/rootfs-test.sim") / plugin: $(tail -5 "$build/rootfs-test.dp")"
grep -q '"resource":"nvidia.com/gpu"' "$build/rootfs-test.sim" ||
    fail "no nvidia.com/gpu capacity: $(cat "$build/rootfs-test.sim")"
kill -TERM "$dp_pid"
wait "$dp_pid"
rc=$?
dp_pid=
[ $rc = 0 ] || fail "device plugin exited $rc on SIGTERM: $(tail -5 "$build/rootfs-test.dp")"
echo "ok: ENTRYPOINT ${entry[*]} with NVIDIA's static-manifest args registered inside the rootfs and stopped cleanly on SIGTERM"
rm -f "$build/rootfs-test.sim" "$build/rootfs-test.dp"
