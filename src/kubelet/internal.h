/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet/internal.h: helpers shared inside src/kubelet by the DRA files (dra.c, the
 * plugin's side, and dra_client.c, the kubelet's side). Never included from outside
 * src/kubelet. */
#ifndef GS_KUBELET_INTERNAL_H
#define GS_KUBELET_INTERNAL_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kubelet/kubelet.h"
#include "rpc/rpc.h"

/* Packs msg into a new buffer (owned: free()). 0 or -ENOMEM. */
int kdra__pack(const ProtobufCMessage *msg, uint8_t **ret, size_t *ret_len);
/* A claim namespace, name or UID: 1..KDRA_MAX_NAME_LEN bytes of [A-Za-z0-9._-]. */
bool kdra__name_ok(const char *s);
/* Releases n results and frees the array. Accepts NULL. */
void kdra__results_free(struct kdra_result *results, size_t n);

#endif
