/* SPDX-License-Identifier: Apache-2.0 */
/* fixture.c: the fake driver root the cdi tests build specs over (device nodes as plain
 * files, libraries of two versions, a binary, firmware, a socket, the driver's mig-minors;
 * GPU 1 in MIG mode with two instances) and helpers to read a spec back. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "fixture.h"

void fx_touch(struct fx *f, const char *rel)
{
    char p[512];
    snprintf(p, sizeof(p), "%s%s", f->root, rel);
    /* parents */
    for (char *s = strchr(p + strlen(f->dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        (void)mkdir(p, 0755);
        *s = '/';
    }
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
}

void fx_write_file(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    strcpy(f->dir, "/tmp/gs-cdi-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
    snprintf(f->proc, sizeof(f->proc), "%s/proc", f->dir);
    snprintf(f->out, sizeof(f->out), "%s/out/cdi", f->dir);
    assert_int_equal(mkdir(f->root, 0755), 0);
    fx_touch(f, "/dev/nvidia0");
    fx_touch(f, "/dev/nvidia1");
    fx_touch(f, "/dev/nvidiactl");
    fx_touch(f, "/dev/nvidia-uvm");
    fx_touch(f, "/dev/nvidia-caps/nvidia-cap21");
    fx_touch(f, "/dev/nvidia-caps/nvidia-cap22");
    fx_touch(f, "/usr/lib/x86_64-linux-gnu/libcuda.so." VER);
    fx_touch(f, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." VER);
    fx_touch(f, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"); /* a soname link: not mounted */
    fx_touch(f, "/usr/lib/x86_64-linux-gnu/libcuda.so.535.1");  /* another version: not mounted */
    fx_touch(f, "/usr/bin/nvidia-smi");
    fx_touch(f, "/lib/firmware/nvidia/" VER "/gsp_ga10x.bin");
    fx_touch(f, "/run/nvidia-persistenced/socket");

    str_copy(f->inv.driver_version, VER, sizeof(f->inv.driver_version));
    f->inv.gpus = f->gpus;
    f->inv.n_gpus = 2;
    for (unsigned i = 0; i < 2; i++) {
        f->gpus[i].index = i;
        f->gpus[i].minor = i;
        snprintf(f->gpus[i].uuid, sizeof(f->gpus[i].uuid),
                 "GPU-%u000000-0000-0000-0000-000000000000", i);
    }
    /* GPU 1 is in MIG mode with two instances */
    f->gpus[1].mig_enabled = true;
    f->gpus[1].migs = f->migs;
    f->gpus[1].n_migs = 2;
    for (unsigned m = 0; m < 2; m++) {
        f->migs[m].index = m;
        f->migs[m].gi_id = m == 0 ? 1 : 2;
        f->migs[m].ci_id = 0;
        snprintf(f->migs[m].uuid, sizeof(f->migs[m].uuid),
                 "MIG-%u0000000-0000-0000-0000-000000000000", m);
    }
    char d[256];
    snprintf(d, sizeof(d), "%s/driver", f->proc);
    assert_int_equal(mkdir(f->proc, 0755), 0);
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(d, sizeof(d), "%s/driver/nvidia-caps", f->proc);
    assert_int_equal(mkdir(d, 0755), 0);
    snprintf(d, sizeof(d), "%s/driver/nvidia-caps/mig-minors", f->proc);
    const char minors[] = "config 1\nmonitor 2\ngpu1/gi1/access 147\ngpu1/gi1/ci0/access 148\n"
                          "gpu1/gi2/access 156\ngpu1/gi2/ci0/access 157\n";
    fx_write_file(d, minors, sizeof(minors) - 1);
    fx_touch(f, "/dev/nvidia-caps/nvidia-cap147");
    fx_touch(f, "/dev/nvidia-caps/nvidia-cap148");
    fx_touch(f, "/dev/nvidia-caps/nvidia-cap156");
    fx_touch(f, "/dev/nvidia-caps/nvidia-cap157");

    f->o = (struct cdi_options){
        .driver_root = f->root,
        .dev_root = f->root,
        .host_driver_root = "/run/nvidia/driver",
        .host_dev_root = "/",
        .proc_root = f->proc,
        .hook_path = "/usr/bin/nvidia-cdi-hook",
    };
    *state = f;
    return 0;
}

int fx_teardown(void **state)
{
    struct fx *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

json_t *fx_device(json_t *spec, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(spec, "devices"), i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "name")), name) == 0)
            return d;
    }
    return NULL;
}

/* every deviceNodes[].path of edits, joined with ',' */
void fx_node_paths(json_t *edits, char *buf, size_t n)
{
    size_t i;
    json_t *node;
    buf[0] = '\0';
    json_array_foreach(json_object_get(edits, "deviceNodes"), i, node)
    {
        if (buf[0])
            strncat(buf, ",", n - strlen(buf) - 1);
        strncat(buf, json_string_value(json_object_get(node, "path")), n - strlen(buf) - 1);
    }
}

bool fx_has_mount(json_t *spec, const char *ctr, const char *host)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(json_object_get(spec, "containerEdits"), "mounts"), i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "containerPath")), ctr) == 0)
            return strcmp(json_string_value(json_object_get(m, "hostPath")), host) == 0;
    }
    return false;
}
