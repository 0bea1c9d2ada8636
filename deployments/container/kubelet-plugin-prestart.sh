#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kubelet-plugin-prestart.sh: the init container of NVIDIA's DRA chart (v25.12.0 and
# v0.4.0 run `bash /usr/bin/kubelet-plugin-prestart.sh`), written for gpuslice's image. It
# does what NVIDIA's v0.4.0 does: links /driver-root to the driver's folder under the
# /driver-root-parent mount, then waits until nvidia-smi and libnvidia-ml.so.1 are there and
# `nvidia-smi --version` answers (it checks the driver without initialising a GPU, so a node
# whose GPUs are all bound to vfio-pci passes too), saying every minute what is wrong and
# what to set. Exit 0 when the driver works; SIGTERM
# (the pod deleted while the Operator mounts the driver) exits 0 too. Needs bash, coreutils,
# findutils (deployments/container/runtime-packages.txt). docs/operator.md.

root=${NVIDIA_DRIVER_ROOT:-/}
interval_s=${PRESTART_INTERVAL_S:-10} # between checks; tests make it short
hint_every=${PRESTART_HINT_EVERY:-6}  # checks between two explanations

# the driver root on the host is mounted one level up, at /driver-root-parent: "/" is
# itself, /run/nvidia/driver is /driver-root-parent/driver
trimmed=${root%/}
link_target=/driver-root-parent/$(basename "${trimmed:-/}")
[ "$trimmed" = "" ] && link_target=/driver-root-parent/
echo "create symlink: /driver-root -> ${link_target}"
# the link may dangle until the Operator's driver container mounts the driver: it heals then
ln -sfn "${link_target}" /driver-root

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# the first match of name under the given folders (not recursive: the driver root can be a
# whole host filesystem), following links (libnvidia-ml.so.1 usually is one)
first() {
    local name=$1
    shift
    find -L "$@" -maxdepth 1 -type f -name "$name" 2>/dev/null | head -n1
}

explain() {
    echo
    echo "The NVIDIA driver was not found working under NVIDIA_DRIVER_ROOT='${root}' on the host."
    echo "If that path is wrong, set the chart value nvidiaDriverRoot (a driver from the GPU"
    echo "Operator lives at /run/nvidia/driver; one installed on the host at /)."
    if [ "$root" != "/" ] && [ -z "$(ls -A /driver-root 2>/dev/null)" ]; then
        echo "Hint: ${root} is empty on the host: is the driver installed (or its container running)?"
    elif [ -z "$smi" ] || [ -z "$nvml" ]; then
        echo "Hint: ${root} has files, but not both nvidia-smi and libnvidia-ml.so.1."
    fi
    if [ "$root" = "/" ] && [ -f /driver-root/run/nvidia/driver/usr/bin/nvidia-smi ]; then
        echo "Hint: /run/nvidia/driver/usr/bin/nvidia-smi exists on the host: install the chart"
        echo "with --set nvidiaDriverRoot=/run/nvidia/driver"
    fi
    if [ "$root" = "/run/nvidia/driver" ]; then
        echo "Hint: /run/nvidia/driver is where the GPU Operator's driver container puts the"
        echo "driver: check that the Operator is deployed and its driver pod is healthy."
    fi
    echo
}

check() {
    smi=$(first nvidia-smi /driver-root/opt/bin /driver-root/usr/bin /driver-root/usr/sbin \
        /driver-root/bin /driver-root/sbin)
    nvml=$(first libnvidia-ml.so.1 /driver-root/usr/lib64 /driver-root/usr/lib/x86_64-linux-gnu \
        /driver-root/usr/lib/aarch64-linux-gnu /driver-root/lib64 \
        /driver-root/lib/x86_64-linux-gnu /driver-root/lib/aarch64-linux-gnu)
    echo "$(now)  /driver-root (${root} on host): nvidia-smi: ${smi:-not found}," \
        "libnvidia-ml.so.1: ${nvml:-not found}," \
        "contents: [$(ls -1xAw0 /driver-root 2>/dev/null)]"
    if [ -n "$smi" ] && [ -n "$nvml" ]; then
        echo "invoke: env -i LD_PRELOAD=${nvml} ${smi} --version"
        env -i LD_PRELOAD="$nvml" "$smi" --version
        rc=$?
        if [ "$rc" -eq 0 ]; then
            echo "nvidia-smi returned 0: the driver works"
            exit 0
        fi
        echo "nvidia-smi exited ${rc}"
    fi
    [ $((attempt % hint_every)) -eq 0 ] && explain
}

trap 'echo "$(now): received SIGTERM"; exit 0' TERM

attempt=0
while true; do
    check
    sleep "$interval_s" &
    wait $! # a SIGTERM ends the wait at once
    attempt=$((attempt + 1))
done
