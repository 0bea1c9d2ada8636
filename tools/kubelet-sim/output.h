/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim output: text and JSON views of the state (output.c). Returned json_t values
 * are owned by the caller (json_decref); the state is only read. */
#ifndef GS_KUBELET_SIM_OUTPUT_H
#define GS_KUBELET_SIM_OUTPUT_H

#include <jansson.h>

#include "sim.h"

json_t *sim_out_capacity_json(const struct sim_state *s);
void sim_out_capacity_text(const struct sim_state *s, struct strbuf *out);
json_t *sim_out_devices_json(const struct sim_state *s, const struct sim_resource *r);
void sim_out_devices_text(const struct sim_state *s, const struct sim_resource *r,
                          struct strbuf *out);
/* details: add every Allocate response (envs, annotations, mounts, devices, CDI). */
json_t *sim_out_pod_json(const struct sim_pod *p, bool details);
void sim_out_pod_text(const struct sim_pod *p, bool details, struct strbuf *out);

#endif
