/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h: what spec.c shares with claim.c (never included from outside src/cdi): the
 * discovery context and the two pieces both kinds of spec are made of, a device's nodes
 * (a GPU's /dev/nvidia<minor>, a MIG device's capability nodes) and the common container
 * edits (control nodes, driver libraries and binaries, hooks, env). */
#ifndef GS_CDI_INTERNAL_H
#define GS_CDI_INTERNAL_H

#include <jansson.h>

#include "cdi/cdi.h"

/* One spec being built. Everything is owned; cdi__ctx_release frees it. */
struct cdi__ctx {
    const struct cdi_options *o; /* borrowed */
    const char *driver_version;  /* borrowed; "" in specs without driver files */
    struct error *err;           /* borrowed, may be NULL */
    json_t *common_nodes, *mounts, *hooks, *env;
    char **mounted;   /* container paths already mounted */
    char **lib_dirs;  /* container paths of the driver's library folders, found order */
    char **real_dirs; /* their real paths (to skip /lib vs /usr/lib twins) */
    char *libcuda_dir;
    char *mig_minors;            /* the driver's mig-minors text, read on first need */
    struct error mig_minors_err; /* why it could not be read (code 0: not tried or read) */
    /* DRA claim specs write MIG capability nodes as character devices the runtime creates
     * (type "c", major of nvidia-caps from /proc/devices), as NVIDIA's DRA driver does: the
     * host needs no /dev/nvidia-caps. The device plugin's spec keeps host nodes. */
    bool cap_char_nodes;
    int caps_major;              /* -1: not read yet; -2: /proc/devices has no nvidia-caps */
    struct error caps_major_err; /* why (when -2) */
    struct strbuf a, b;
};

/* -ENOMEM when the JSON arrays cannot be made (c is still safe to release). */
int cdi__ctx_init(struct cdi__ctx *c, const struct cdi_options *o, const char *driver_version,
                  struct error *err);
void cdi__ctx_release(struct cdi__ctx *c);

/* {"path": abs, "hostPath": <host dev root><abs>} appended to arr. -ENOMEM. */
int cdi__add_node(struct cdi__ctx *c, json_t *arr, const char *abs);

/* {"hostPath", "containerPath", "options"}; NULL on out of memory. options NULL-terminated. */
json_t *cdi__mount_new(const char *host_path, const char *container_path,
                       const char *const *options);

/* The nodes of a GPU (/dev/nvidia<minor>) or, with mig, of a MIG device of that GPU (the
 * parent's node, then /dev/nvidia-caps/nvidia-cap<N> of GPU instance gi and compute
 * instance ci, N from the driver's capabilities/gpu<minor>/mig/gi<g>[/ci<c>]/access file or
 * else from its mig-minors) appended to nodes. With c->cap_char_nodes the capability nodes
 * are {"path", "type": "c", "major", "minor", "fileMode"} when /proc/devices names the
 * nvidia-caps major (else the host's node, when it has one). -ENOENT naming `who` when a
 * node or minor is missing. */
int cdi__device_nodes(struct cdi__ctx *c, unsigned minor, bool mig, unsigned gi, unsigned ci,
                      const char *who, json_t *nodes);

/* {"name": name, "containerEdits": {"deviceNodes": nodes}} appended to devices. */
int cdi__add_device(struct cdi__ctx *c, json_t *devices, const char *name, json_t *nodes);

/* Fills edits (a JSON object) with the edits every device needs: env, deviceNodes, mounts,
 * hooks. Fails as cdi_spec_build does when the driver's files are missing. */
int cdi__common_edits(struct cdi__ctx *c, json_t *edits);

/* {"cdiVersion", "kind", "devices", "containerEdits" (when edits)} as indented JSON text,
 * owned by the caller. -ENOMEM. */
int cdi__spec_dump(struct cdi__ctx *c, const char *kind, json_t *devices, json_t *edits,
                   char **ret_json);

#endif
