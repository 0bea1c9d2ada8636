/* SPDX-License-Identifier: Apache-2.0 */
/* attrib.c: which pod a GPU process belongs to, from /proc/<pid>/cgroup — cgroup v1 and v2,
 * the systemd and cgroupfs drivers, containerd, CRI-O and Docker naming. Pure: the caller
 * reads the file. */
#include <ctype.h>
#include <string.h>

#include "metrics/metrics.h"

/* Copies [s, s+n) into out (size), '_' turned into '-' when dash. */
static void copy_id(const char *s, size_t n, char *out, size_t size, bool dash)
{
    size_t k = 0;
    for (; k < n && k + 1 < size; k++)
        out[k] = dash && s[k] == '_' ? '-' : s[k];
    out[k] = '\0';
}

/* The container id in the last path segment: "cri-containerd-<id>.scope", "crio-<id>.scope",
 * "docker-<id>.scope" (systemd) or "<id>" / "crio-<id>" (cgroupfs). */
static void container_id(const char *seg, size_t n, char *out, size_t size)
{
    static const char *const prefixes[] = {"cri-containerd-", "crio-", "docker-", NULL};
    if (n > 6 && strncmp(seg + n - 6, ".scope", 6) == 0)
        n -= 6;
    for (size_t i = 0; prefixes[i]; i++) {
        size_t p = strlen(prefixes[i]);
        if (n > p && strncmp(seg, prefixes[i], p) == 0) {
            seg += p;
            n -= p;
            break;
        }
    }
    /* a container id is 64 hex digits; anything else (a conmon scope) is not one */
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)seg[i]))
            n = 0;
    copy_id(seg, n, out, size, false);
}

/* The pod UID a cgroup path segment names: systemd's kubepods-<qos>-pod<uid_with_
 * underscores>.slice or cgroupfs' pod<uid>; NULL otherwise. */
static const char *segment_pod(const char *seg, size_t n, size_t *ret_len)
{
    const char *m = n > 3 ? memmem(seg, n, "-pod", 4) : NULL;

    if (m && n > 6 && strncmp(seg + n - 6, ".slice", 6) == 0) {
        *ret_len = (size_t)(seg + n - 6 - (m + 4));
        return m + 4;
    }
    if (n > 3 && strncmp(seg, "pod", 3) == 0) {
        *ret_len = n - 3;
        return seg + 3;
    }
    return NULL;
}

/* One line's path (after "<id>:<controllers>:") segment by segment: the pod UID into uid,
 * the last segment (the container's) into *ret_last. */
static void path_pod(const char *p, const char *stop, char *uid, size_t uid_size,
                     const char **ret_last, size_t *ret_last_len)
{
    while (p < stop) {
        const char *slash = memchr(p + 1, '/', (size_t)(stop - p - 1));
        const char *seg = *p == '/' ? p + 1 : p;
        size_t n = (size_t)((slash ? slash : stop) - seg), pod_len = 0;
        const char *pod = segment_pod(seg, n, &pod_len);

        if (pod && pod_len >= 32)
            copy_id(pod, pod_len, uid, uid_size, true);
        if (n) {
            *ret_last = seg;
            *ret_last_len = n;
        }
        p = slash ? slash : stop;
    }
}

int metrics_cgroup_pod(const char *text, char *uid, size_t uid_size, char *cid, size_t cid_size)
{
    uid[0] = cid[0] = '\0';
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *path = memchr(line, ':', len);
        path = path ? memchr(path + 1, ':', len - (size_t)(path + 1 - line)) : NULL;
        if (path && memmem(path, len - (size_t)(path - line), "kubepods", 8)) {
            const char *last = NULL;
            size_t last_len = 0;
            path_pod(path + 1, line + len, uid, uid_size, &last, &last_len);
            if (uid[0]) {
                if (last)
                    container_id(last, last_len, cid, cid_size);
                return 1;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}
