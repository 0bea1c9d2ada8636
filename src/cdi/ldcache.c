/* SPDX-License-Identifier: Apache-2.0 */
/* ldcache.c: reads glibc's /etc/ld.so.cache to learn where the driver's libraries live, as
 * nvidia-container-toolkit does before it falls back to the standard library folders.
 * Formats (glibc elf/cache.c): the "new" one, "glibc-ld.so.cache1.1", either alone (the
 * default since glibc 2.32) or after an old "ld.so-1.7.0" table. String offsets of the new
 * format count from the start of its own header. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cdi/cdi.h"

#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_MAGIC "glibc-ld.so.cache1.1"
#define NEW_HEADER_SIZE 48u /* magic+version 20, nlibs, len_strings, flags+pad, ext, unused */
#define NEW_ENTRY_SIZE 24u  /* int32 flags, u32 key, u32 value, u32 osversion, u64 hwcap */
#define OLD_ENTRY_SIZE 12u  /* int flags, u32 key, u32 value */
#define CACHE_MAX_BYTES (64u * 1024u * 1024u)

/* flags: the low byte is the type (3: ELF libc6), the next one the architecture (0 is a
 * 32-bit i386 library, which a 64-bit container does not want). */
#define FLAG_TYPE_MASK 0x00ffu
#define FLAG_ELF_LIBC6 0x0003u
#define FLAG_ARCH_MASK 0xff00u
#define FLAG_ARCH_X8664 0x0300u
#define FLAG_ARCH_AARCH64 0x0a00u
#define FLAG_ARCH_IA64 0x0100u
#define FLAG_ARCH_RISCV64 0x1000u /* riscv64 lp64d */

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static bool wanted(uint32_t flags)
{
    uint32_t arch = flags & FLAG_ARCH_MASK;
    return (flags & FLAG_TYPE_MASK) == FLAG_ELF_LIBC6 &&
           (arch == FLAG_ARCH_X8664 || arch == FLAG_ARCH_AARCH64 || arch == FLAG_ARCH_IA64 ||
            arch == FLAG_ARCH_RISCV64);
}

int cdi_ldcache_read(const char *path, char ***ret_paths, struct error *err)
{
    char *data = NULL;
    size_t len = 0, off = 0;
    char **paths = NULL;
    int r = file_read_all(path, CACHE_MAX_BYTES, &data, &len, err);
    if (r < 0)
        return r;

    const unsigned char *u = (const unsigned char *)data;
    if (len >= sizeof(OLD_MAGIC) - 1 && memcmp(data, OLD_MAGIC, sizeof(OLD_MAGIC) - 1) == 0) {
        /* struct { char magic[11]; uint32 nlibs; entries } then the new table, 8-aligned */
        if (len < 16) {
            r = error_set(err, -EINVAL, "%s: truncated ld.so cache", path);
            goto out;
        }
        uint64_t n_old = get_u32(u + 12);
        uint64_t end = 16 + n_old * OLD_ENTRY_SIZE;
        off = (size_t)((end + 7) & ~(uint64_t)7);
        if (end > len) {
            r = error_set(err, -EINVAL, "%s: truncated ld.so cache (%llu old entries)", path,
                          (unsigned long long)n_old);
            goto out;
        }
    }
    if (len < off + NEW_HEADER_SIZE || memcmp(data + off, NEW_MAGIC, sizeof(NEW_MAGIC) - 1) != 0) {
        r = error_set(err, -EINVAL,
                      "%s: not an ld.so cache in glibc's format (no \"%s\" header); run "
                      "ldconfig on the host or remove the file to use the library folders",
                      path, NEW_MAGIC);
        goto out;
    }
    const unsigned char *h = u + off;
    uint64_t n = get_u32(h + 20);
    if (off + NEW_HEADER_SIZE + n * NEW_ENTRY_SIZE > len) {
        r = error_set(err, -EINVAL, "%s: truncated ld.so cache (%llu entries)", path,
                      (unsigned long long)n);
        goto out;
    }
    size_t avail = len - off; /* string offsets are relative to h */
    paths = strv_new();
    if (!paths) {
        r = -ENOMEM;
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *e = h + NEW_HEADER_SIZE + i * NEW_ENTRY_SIZE;
        uint32_t flags = get_u32(e), value = get_u32(e + 8);
        if (!wanted(flags))
            continue;
        if (value >= avail || !memchr(h + value, '\0', avail - value)) {
            r = error_set(err, -EINVAL, "%s: entry %llu points outside the cache", path,
                          (unsigned long long)i);
            goto out;
        }
        r = strv_push(&paths, (const char *)h + value);
        if (r < 0)
            goto out;
    }
    *ret_paths = paths;
    paths = NULL;
    r = 0;
out:
    strv_free(paths);
    free(data);
    return r;
}
