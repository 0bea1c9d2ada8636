# SPDX-License-Identifier: Apache-2.0
# fake_driver_root.py: a host driver root as the device plugin's container sees it — device
# nodes as plain files (16 GPUs, every MIG capability minor), the driver's libraries of the
# example machines' version, nvidia-smi — for the tests that turn a CDI strategy on; and a
# /proc/devices naming the nvidia-caps major (make_proc_devices).
import os

DRIVER = "570.158.01"  # the example machines' driver version


def make(root):
    os.makedirs(os.path.join(root, "dev/nvidia-caps"), exist_ok=True)
    names = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] + ["nvidia%d" % i for i in range(16)]
    names += ["nvidia-caps/nvidia-cap%d" % i for i in range(1, 16 * 135 + 3)]
    for n in names:
        open(os.path.join(root, "dev", n), "w").close()
    lib = os.path.join(root, "usr/lib/x86_64-linux-gnu")
    os.makedirs(lib, exist_ok=True)
    for name in ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"):
        open(os.path.join(lib, "%s.%s" % (name, DRIVER)), "w").close()
    os.makedirs(os.path.join(root, "usr/bin"), exist_ok=True)
    open(os.path.join(root, "usr/bin/nvidia-smi"), "w").close()
    return root


# /proc/devices of a host whose driver loaded nvidia-caps (NVIDIA's DRA driver reads the
# major of the MIG capability nodes it writes into claim specs from here).
CAPS_MAJOR = 508


def make_proc_devices(proc_root):
    os.makedirs(proc_root, exist_ok=True)
    with open(os.path.join(proc_root, "devices"), "w") as f:
        f.write("Character devices:\n  1 mem\n195 nvidia-frontend\n%d nvidia-caps\n"
                "%d nvidia-caps-imex-channels\n\nBlock devices:\n  8 sd\n"
                % (CAPS_MAJOR, CAPS_MAJOR + 1))
    return proc_root
