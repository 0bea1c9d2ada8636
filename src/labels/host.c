/* SPDX-License-Identifier: Apache-2.0 */
/* host.c: the host facts GFD's labels need besides NVML, read the way GFD reads them — the
 * DMI product name (machine type), each GPU's PCI class (gpu.mode), and the vGPU
 * capability in the PCI config space of NVIDIA devices (vgpu.*). Shared by `gpuslice
 * labels`, `feature-discovery` and the daemon's --labels so all three label alike. The
 * capability parser itself is pure (labels_vgpu_parse). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "labels/write.h"

/* PCI config space offsets (PCI Local Bus spec) */
#define PCI_STATUS 0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_CAPABILITY_LIST 0x34
#define PCI_CAP_ID_VNDR 0x09
/* GFD's vGPU record: vendor capability bytes 3..4 "VF", records from byte 5, each
 * (type, length); the type-0 record holds the host driver version and branch, 10 bytes
 * each, NUL-padded. */
#define VGPU_RECORD_START 5
#define VGPU_FIELD_LEN 10

static void copy_field(const unsigned char *p, char *out, size_t size)
{
    size_t n = 0;
    while (n < VGPU_FIELD_LEN && n + 1 < size && p[n]) {
        out[n] = (char)p[n];
        n++;
    }
    out[n] = '\0';
}

int labels_vgpu_parse(const unsigned char *cfg, size_t len, char *version, size_t vsize,
                      char *branch, size_t bsize)
{
    unsigned char visited[256] = {0};
    unsigned pos;

    if (vsize)
        version[0] = '\0';
    if (bsize)
        branch[0] = '\0';
    if (len < 256) /* an unprivileged read gets 64 bytes: the capabilities are beyond */
        return -EACCES;
    if (!(cfg[PCI_STATUS] & PCI_STATUS_CAP_LIST))
        return 0;
    for (pos = cfg[PCI_CAPABILITY_LIST]; pos != 0 && pos < 254; pos = cfg[pos + 1]) {
        unsigned id = cfg[pos], caplen = cfg[pos + 2];
        if (visited[pos]++ || id == 0xff) /* looped or broken chain */
            return 0;
        if (id != PCI_CAP_ID_VNDR)
            continue;
        if (pos + caplen > len)
            caplen = (unsigned)(len - pos);
        const unsigned char *cap = cfg + pos;
        if (caplen < 5 || cap[3] != 'V' || cap[4] != 'F')
            return 0;
        unsigned p = VGPU_RECORD_START;
        while (p < caplen && cap[p] != 0 && p + 1 < caplen && cap[p + 1] != 0)
            p += cap[p + 1];
        if (p < caplen && cap[p] == 0 && p + 2 + 2 * VGPU_FIELD_LEN <= caplen) {
            copy_field(cap + p + 2, version, vsize);
            copy_field(cap + p + 2 + VGPU_FIELD_LEN, branch, bsize);
        }
        return 1;
    }
    return 0;
}

/* Drops trailing whitespace (sysfs and DMI files end in a newline); returns s. */
static char *rstrip(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* "0x030200" -> 0x030200; -EINVAL for anything else. */
static int parse_hex(const char *s, unsigned long *ret)
{
    unsigned long v = 0;
    size_t n = 0;

    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return -EINVAL;
    for (s += 2; *s && n < 8; s++, n++) {
        int d = *s >= '0' && *s <= '9'   ? *s - '0'
                : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
                : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10
                                         : -1;
        if (d < 0)
            return -EINVAL;
        v = v * 16 + (unsigned long)d;
    }
    if (*s || n == 0)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int read_hex(const char *path, unsigned long *ret)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, 64, &text, &len, NULL);
    if (r == 0)
        r = parse_hex(rstrip(text), ret);
    free(text);
    return r;
}

/* The PCI class (base << 8 | sub) from <sysfs>/bus/pci/devices/<bus id>/class, which holds
 * "0x030200"; 0 when unreadable. NVML's bus id is "00000000:3B:00.0", sysfs's
 * "0000:3b:00.0". */
static uint32_t read_pci_class(const char *sysfs_root, const char *bus_id)
{
    char id[64], path[512];
    unsigned long v = 0;

    if (gpu_pci_sysfs_name(bus_id, id, sizeof(id)) < 0)
        return 0;
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/class", sysfs_root, id);
    return read_hex(path, &v) == 0 ? (uint32_t)(v >> 8) : 0;
}

/* GFD scans every NVIDIA PCI function (a vGPU guest's GPU is one), not only NVML's GPUs. */
static void scan_vgpu(const char *sysfs_root, struct labels_host *h)
{
    char dir[512], path[1024];
    struct dirent *de;
    DIR *d;

    snprintf(dir, sizeof(dir), "%s/bus/pci/devices", sysfs_root);
    d = opendir(dir);
    while (d && (de = readdir(d))) {
        unsigned long vendor = 0;
        char *cfg = NULL;
        size_t len = 0;

        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/vendor", dir, de->d_name);
        if (read_hex(path, &vendor) < 0 || vendor != 0x10de)
            continue;
        snprintf(path, sizeof(path), "%s/%s/config", dir, de->d_name);
        if (file_read_all(path, 4096, &cfg, &len, NULL) < 0)
            continue;
        int r = labels_vgpu_parse((const unsigned char *)cfg, len, h->vgpu_version,
                                  sizeof(h->vgpu_version), h->vgpu_branch, sizeof(h->vgpu_branch));
        free(cfg);
        if (r == -EACCES)
            h->vgpu_unreadable = true;
        if (r == 1) {
            h->vgpu_present = true;
            break;
        }
    }
    if (d)
        closedir(d);
}

int labels_host_read(const struct inv_inventory *inv, const char *sysfs_root,
                     const char *machine_type_file, struct labels_host *h)
{
    const char *sysfs = sysfs_root && *sysfs_root ? sysfs_root : "/sys";
    char *text = NULL;
    size_t len = 0;

    memset(h, 0, sizeof(*h));
    if (file_read_all(machine_type_file && *machine_type_file ? machine_type_file
                                                              : LABELS_MACHINE_TYPE_FILE,
                      4096, &text, &len, NULL) == 0)
        h->machine_type = str_dup(rstrip(text));
    free(text);
    if (inv->n_gpus) {
        h->pci_class = calloc(inv->n_gpus, sizeof(*h->pci_class));
        if (!h->pci_class)
            return -ENOMEM;
        for (size_t i = 0; i < inv->n_gpus; i++)
            h->pci_class[i] = read_pci_class(sysfs, inv->gpus[i].pci_bus_id);
    }
    scan_vgpu(sysfs, h);
    return 0;
}

void labels_host_apply(const struct labels_host *h, struct labels_options *o)
{
    o->machine_type = h->machine_type;
    o->pci_class = h->pci_class;
    o->vgpu_present = h->vgpu_present;
    o->vgpu_host_driver_version = h->vgpu_version;
    o->vgpu_host_driver_branch = h->vgpu_branch;
}

void labels_host_release(struct labels_host *h)
{
    free(h->machine_type);
    free(h->pci_class);
    memset(h, 0, sizeof(*h));
}
