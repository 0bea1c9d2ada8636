/* SPDX-License-Identifier: Apache-2.0 */
/* names.c: pure naming rules the inventory applies to what NVML reports — go-nvlib's MIG
 * profile names ("1g.10gb", "1c.2g.20gb", "+me"), nvidia-smi's topology labels and the
 * sysfs name of a PCI bus id. No NVML calls and no I/O: table-tested in tests/unit/gpu. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu.h"

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

unsigned gpu_mig_memory_gb(uint64_t profile_memory_mib, uint64_t total_bytes)
{
    uint64_t eighths, total_gb;

    if (total_bytes == 0)
        return 0;
    /* Integer form of go-nvlib's getMigMemorySizeGB: the profile's share of the GPU,
     * rounded up to eighths, times the GPU's size rounded up to whole GiB, rounded. */
    eighths = (profile_memory_mib * MIB * 8 + total_bytes - 1) / total_bytes;
    total_gb = (total_bytes + GIB - 1) / GIB;
    return (unsigned)((eighths * total_gb + 4) / 8);
}

int gpu_mig_profile_name(unsigned ci_slices, unsigned gi_slices, unsigned memory_gb,
                         const char *suffix, char *buf, size_t size)
{
    int n;

    if (ci_slices == 0 || gi_slices == 0 || ci_slices > gi_slices)
        return -EINVAL;
    if (!suffix)
        suffix = "";
    if (ci_slices == gi_slices)
        n = snprintf(buf, size, "%ug.%ugb%s", gi_slices, memory_gb, suffix);
    else
        n = snprintf(buf, size, "%uc.%ug.%ugb%s", ci_slices, gi_slices, memory_gb, suffix);
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}

const char *gpu_link_label(const struct inv_link *link, bool self, char *buf, size_t size)
{
    if (self)
        return "X";
    if (link->nvlinks > 0) {
        int n = snprintf(buf, size, "NV%u", link->nvlinks);
        return n > 0 && (size_t)n < size ? buf : "NV";
    }
    switch (link->pcie) {
    case INV_PCIE_SAME:
        return "SAME";
    case INV_PCIE_SINGLE:
        return "PIX";
    case INV_PCIE_MULTIPLE:
        return "PXB";
    case INV_PCIE_HOSTBRIDGE:
        return "PHB";
    case INV_PCIE_NODE:
        return "NODE";
    case INV_PCIE_SYSTEM:
        return "SYS";
    }
    return "SYS";
}

/* Parses exactly len hex digits (1..8) at s. */
static int parse_hex(const char *s, size_t len, unsigned *ret)
{
    unsigned v = 0;

    if (len == 0 || len > 8)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        int d = str_hex_digit((unsigned char)s[i]);
        if (d < 0)
            return -EINVAL;
        v = v << 4 | (unsigned)d;
    }
    *ret = v;
    return 0;
}

int gpu_pci_sysfs_name(const char *bus_id, char *buf, size_t size)
{
    const char *c1, *c2, *dot;
    unsigned domain, bus, dev, fn;
    int n;

    /* <domain 4 or 8 hex>:<bus 2 hex>:<device 2 hex>.<function 1 hex> */
    c1 = strchr(bus_id, ':');
    c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    dot = c2 ? strchr(c2 + 1, '.') : NULL;
    if (!dot || strlen(dot + 1) != 1)
        return -EINVAL;
    if (parse_hex(bus_id, (size_t)(c1 - bus_id), &domain) < 0 ||
        parse_hex(c1 + 1, (size_t)(c2 - c1 - 1), &bus) < 0 ||
        parse_hex(c2 + 1, (size_t)(dot - c2 - 1), &dev) < 0 || parse_hex(dot + 1, 1, &fn) < 0)
        return -EINVAL;
    if (c2 - c1 - 1 != 2 || dot - c2 - 1 != 2 || (c1 - bus_id != 4 && c1 - bus_id != 8))
        return -EINVAL;
    n = snprintf(buf, size, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}
