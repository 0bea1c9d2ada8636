/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for tools/kubelet-sim state.c, cmd.c and output.c (pure): the control-language parser,
 * the text views, kubelet's
 * registration checks (kubelet's texts), device choice with a preferred answer,
 * capacity/allocatable/allocated bookkeeping and pod deletion freeing devices. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "output.h"
#include "sim.h"

/* ---- cmd.c ---- */

static void test_sim_cmd_parse_valid(void **state)
{
    static const struct {
        const char *line;
        enum sim_cmd_kind kind;
        const char *name;
        enum sim_cmp cmp;
        unsigned count;
        int timeout_ms;
        size_t n_requests;
    } cases[] = {
        {"wait nvidia.com/gpu 8", SIM_CMD_WAIT, "nvidia.com/gpu", SIM_CMP_GE, 8, -1, 0},
        {"wait nvidia.com/gpu >=8 500", SIM_CMD_WAIT, "nvidia.com/gpu", SIM_CMP_GE, 8, 500, 0},
        {"wait nvidia.com/gpu <=3", SIM_CMD_WAIT, "nvidia.com/gpu", SIM_CMP_LE, 3, -1, 0},
        {"  wait  x/y =0  ", SIM_CMD_WAIT, "x/y", SIM_CMP_EQ, 0, -1, 0},
        {"wait-resources 2 3000", SIM_CMD_WAIT_RESOURCES, NULL, SIM_CMP_GE, 2, 3000, 0},
        {"capacity", SIM_CMD_CAPACITY, NULL, SIM_CMP_GE, 0, -1, 0},
        {"capacity # comment", SIM_CMD_CAPACITY, NULL, SIM_CMP_GE, 0, -1, 0},
        {"devices nvidia.com/gpu", SIM_CMD_DEVICES, "nvidia.com/gpu", SIM_CMP_GE, 0, -1, 0},
        {"admit p1 nvidia.com/gpu=1", SIM_CMD_ADMIT, "p1", SIM_CMP_GE, 0, -1, 1},
        {"admit p2 a.com/x=2 b.com/y=1", SIM_CMD_ADMIT, "p2", SIM_CMP_GE, 0, -1, 2},
        {"delete p1", SIM_CMD_DELETE, "p1", SIM_CMP_GE, 0, -1, 0},
        {"pods", SIM_CMD_PODS, NULL, SIM_CMP_GE, 0, -1, 0},
        {"pod p1", SIM_CMD_POD, "p1", SIM_CMP_GE, 0, -1, 0},
        {"schedule", SIM_CMD_SCHEDULE, NULL, SIM_CMP_GE, 0, -1, 0},
        {"restart", SIM_CMD_RESTART, NULL, SIM_CMP_GE, 0, -1, 0},
        {"restart 2000\r", SIM_CMD_RESTART, NULL, SIM_CMP_GE, 0, 2000, 0},
        {"quit", SIM_CMD_QUIT, NULL, SIM_CMP_GE, 0, -1, 0},
    };

    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct sim_cmd c;
        struct error err = {0};
        int r = sim_cmd_parse(cases[i].line, &c, &err);
        if (r != 0)
            fail_msg("\"%s\": %d %s", cases[i].line, r, err.msg);
        assert_int_equal(c.kind, cases[i].kind);
        if (cases[i].name)
            assert_string_equal(c.name, cases[i].name);
        else
            assert_null(c.name);
        assert_int_equal(c.cmp, cases[i].cmp);
        assert_int_equal(c.count, cases[i].count);
        assert_int_equal(c.timeout_ms, cases[i].timeout_ms);
        assert_int_equal(c.n_requests, cases[i].n_requests);
        sim_cmd_release(&c);
    }
}

static void test_sim_cmd_parse_requests(void **state)
{
    struct sim_cmd c;

    assert_int_equal(sim_cmd_parse("admit web-1 nvidia.com/gpu=2 example.com/fpga=1", &c, NULL), 0);
    assert_string_equal(c.requests[0].resource, "nvidia.com/gpu");
    assert_int_equal(c.requests[0].count, 2);
    assert_string_equal(c.requests[1].resource, "example.com/fpga");
    assert_int_equal(c.requests[1].count, 1);
    assert_null(c.requests[0].container);
    assert_string_equal(sim_request_container(&c.requests[0]), "main");
    sim_cmd_release(&c);
    /* two containers of one pod, the same resource */
    assert_int_equal(
        sim_cmd_parse("admit web-2 nvidia.com/gpu=1@app nvidia.com/gpu=2@sidecar", &c, NULL), 0);
    assert_int_equal(c.n_requests, 2);
    assert_string_equal(c.requests[0].container, "app");
    assert_int_equal(c.requests[1].count, 2);
    assert_string_equal(sim_request_container(&c.requests[1]), "sidecar");
    sim_cmd_release(&c);
}

static void test_sim_cmd_parse_blank(void **state)
{
    struct sim_cmd c;

    assert_int_equal(sim_cmd_parse("", &c, NULL), 1);
    assert_int_equal(sim_cmd_parse("   \t", &c, NULL), 1);
    assert_int_equal(sim_cmd_parse("# just a comment", &c, NULL), 1);
}

static void test_sim_cmd_parse_invalid(void **state)
{
    static const struct {
        const char *line;
        const char *msg_part;
    } cases[] = {
        {"capacty", "did you mean \"capacity\""},
        {"frobnicate", "unknown command \"frobnicate\""},
        {"wait nvidia.com/gpu", "usage: wait"},
        {"wait nvidia.com/gpu lots", "invalid count \"lots\""},
        {"wait nvidia.com/gpu >=-1", "invalid count"},
        {"wait nvidia.com/gpu 1 soon", "invalid timeout \"soon\""},
        {"wait nvidia.com/gpu 99999", "invalid count"},
        {"admit p1", "usage: admit"},
        {"admit p1 nvidia.com/gpu", "want <resource>=<count>"},
        {"admit p1 nvidia.com/gpu=0", "count must be"},
        {"admit p1 nvidia.com/gpu=x", "count must be"},
        {"admit p1 =1", "want <resource>=<count>"},
        {"admit p1 a/b=1 a/b=2", "requested twice"},
        {"admit p1 a/b=1@x a/b=2@x", "requested twice by one container"},
        {"admit p1 a/b=1@main a/b=2", "requested twice by one container"},
        {"admit p1 a/b=1@Not_A_Name", "a container name is a DNS name"},
        {"admit p1 a/b=1@", "a container name is a DNS name"},
        {"admit p1 a/b=@x", "count must be"},
        {"capacity now", "usage: capacity"},
        {"restart -5", "invalid timeout"},
        {"admit p\xc3\xa9 a.com/b=1", "not printable ASCII at byte 1"},
        {"delete \x01x", "not printable ASCII at byte 0"},
        {"a b c d e f g h i j k l m n o p q r s t u v w x y z 1 2 3 4 5 6 7 8", "too many words"},
    };

    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct sim_cmd c;
        struct error err = {0};
        int r = sim_cmd_parse(cases[i].line, &c, &err);
        if (r != -EINVAL || !strstr(err.msg, cases[i].msg_part))
            fail_msg("\"%s\": got %d \"%s\", want -EINVAL with \"%s\"", cases[i].line, r, err.msg,
                     cases[i].msg_part);
    }
}

static void test_sim_cmd_parse_long_line(void **state)
{
    char *line = malloc(SIM_MAX_LINE + 10);
    struct sim_cmd c;
    struct error err = {0};

    assert_non_null(line);
    memset(line, 'a', SIM_MAX_LINE + 9);
    line[SIM_MAX_LINE + 9] = '\0';
    assert_int_equal(sim_cmd_parse(line, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "too long"));
    free(line);
}

static void test_sim_cmd_parse_long_name(void **state)
{
    char line[400] = "pod ";
    struct sim_cmd c;
    struct error err = {0};

    memset(line + 4, 'p', 254);
    line[4 + 254] = '\0';
    assert_int_equal(sim_cmd_parse(line, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "too long (at most 253 bytes)"));
    line[4 + 253] = '\0';
    assert_int_equal(sim_cmd_parse(line, &c, &err), 0);
    assert_int_equal(strlen(c.name), 253);
    sim_cmd_release(&c);
}

static void test_sim_cmp_holds_table(void **state)
{
    assert_true(sim_cmp_holds(SIM_CMP_GE, 3, 3));
    assert_false(sim_cmp_holds(SIM_CMP_GE, 2, 3));
    assert_true(sim_cmp_holds(SIM_CMP_LE, 2, 3));
    assert_false(sim_cmp_holds(SIM_CMP_LE, 4, 3));
    assert_true(sim_cmp_holds(SIM_CMP_EQ, 3, 3));
    assert_false(sim_cmp_holds(SIM_CMP_EQ, 4, 3));
}

/* ---- registration checks ---- */

static void test_sim_validate_registration_messages(void **state)
{
    struct error err = {0};

    assert_int_equal(
        sim_validate_registration("v1beta1", "nvidia.com/gpu", "nvidia-gpu.sock", &err), 0);
    assert_int_equal(sim_validate_registration("v1alpha", "nvidia.com/gpu", "x.sock", &err),
                     -EINVAL);
    assert_string_equal(err.msg, "requested API version \"v1alpha\" is not supported by kubelet. "
                                 "Supported version is \"v1beta1\"");
    assert_int_equal(sim_validate_registration("v1beta1", "gpu", "x.sock", &err), -EINVAL);
    assert_string_equal(err.msg, "the ResourceName \"gpu\" is invalid");
    assert_int_equal(sim_validate_registration("v1beta1", "kubernetes.io/gpu", "x.sock", &err),
                     -EINVAL);
    assert_int_equal(sim_validate_registration("v1beta1", NULL, "x.sock", &err), -EINVAL);
    assert_int_equal(sim_validate_registration("v1beta1", "a.com/b", "../x.sock", &err), -EINVAL);
    assert_int_equal(sim_validate_registration("v1beta1", "a.com/b", "", &err), -EINVAL);
}

/* ---- device choice ---- */

static void test_sim_choose_devices_order(void **state)
{
    char *avail[] = {"a", "b", "c", "d", NULL};
    char *pref[] = {"d", "zz", "d", "b", NULL}; /* unknown and repeated ids are ignored */
    char *pref_short[] = {"c", NULL};
    char **got = NULL;
    struct error err = {0};

    assert_int_equal(sim_choose_devices(avail, NULL, 2, &got, &err), 0);
    assert_int_equal(strv_length(got), 2);
    assert_string_equal(got[0], "a");
    assert_string_equal(got[1], "b");
    strv_free(got);

    assert_int_equal(sim_choose_devices(avail, pref, 2, &got, &err), 0);
    assert_string_equal(got[0], "d");
    assert_string_equal(got[1], "b");
    strv_free(got);

    /* a short preferred answer is completed in order */
    assert_int_equal(sim_choose_devices(avail, pref_short, 3, &got, &err), 0);
    assert_string_equal(got[0], "c");
    assert_string_equal(got[1], "a");
    assert_string_equal(got[2], "b");
    strv_free(got);

    got = NULL;
    assert_int_equal(sim_choose_devices(avail, pref, 5, &got, &err), -ENOSPC);
    assert_null(got);
    assert_non_null(strstr(err.msg, "requested 5, available 4"));
}

/* ---- bookkeeping ---- */

static struct sim_resource *add_resource(struct sim_state *s, const char *name, size_t n,
                                         size_t n_unhealthy)
{
    const char *ids[8];
    bool healthy[8];
    char buf[8][32];
    struct sim_resource *r = NULL;

    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        snprintf(buf[i], sizeof(buf[i]), "dev-%zu", i);
        ids[i] = buf[i];
        healthy[i] = i >= n_unhealthy;
    }
    assert_int_equal(sim_state_add_resource(s, name, &r, NULL), 0);
    assert_int_equal(sim_resource_set_devices(r, ids, healthy, NULL, n, NULL), 0);
    return r;
}

static struct sim_pod *running_pod(struct sim_state *s, const char *name, const char *resource,
                                   const char *dev)
{
    struct sim_request req = {(char *)resource, 1, NULL};
    struct sim_pod *p = sim_pod_new(name, &req, 1, NULL), *kept;

    assert_non_null(p);
    assert_int_equal(sim_pod_set_phase(p, SIM_POD_RUNNING, NULL, NULL), 0);
    p->allocs[0].resource = strdup(resource);
    p->allocs[0].device_ids = strv_new();
    assert_int_equal(strv_push(&p->allocs[0].device_ids, dev), 0);
    p->n_allocs = 1;
    kept = p;
    assert_int_equal(sim_state_add_pod(s, &p, NULL), 0);
    assert_null(p);
    return kept;
}

static void test_sim_state_capacity_allocatable(void **state)
{
    struct sim_state s = {0};
    struct sim_resource *r = add_resource(&s, "nvidia.com/gpu", 4, 1);
    char **avail = NULL;

    assert_int_equal(sim_resource_capacity(r), 4);
    assert_int_equal(sim_resource_allocatable(r), 3);
    assert_int_equal(sim_state_allocated(&s, r), 0);
    running_pod(&s, "p1", "nvidia.com/gpu", "dev-2");
    assert_int_equal(sim_state_allocated(&s, r), 1);
    assert_true(sim_state_device_is_allocated(&s, "nvidia.com/gpu", "dev-2"));
    assert_false(sim_state_device_is_allocated(&s, "other.com/x", "dev-2"));
    assert_int_equal(sim_state_available(&s, r, &avail), 0);
    assert_int_equal(strv_length(avail), 2); /* dev-0 unhealthy, dev-2 held */
    assert_string_equal(avail[0], "dev-1");
    assert_string_equal(avail[1], "dev-3");
    strv_free(avail);

    /* stream lost: every device unhealthy, capacity unchanged */
    sim_resource_mark_all_unhealthy(r);
    assert_int_equal(sim_resource_capacity(r), 4);
    assert_int_equal(sim_resource_allocatable(r), 0);
    sim_state_release(&s);
}

static void test_sim_state_delete_pod_frees_devices(void **state)
{
    struct sim_state s = {0};
    struct sim_resource *r = add_resource(&s, "nvidia.com/gpu", 2, 0);
    struct sim_pod *dup;
    struct sim_request req = {"nvidia.com/gpu", 1, NULL};
    struct error err = {0};

    running_pod(&s, "p1", "nvidia.com/gpu", "dev-0");
    running_pod(&s, "p2", "nvidia.com/gpu", "dev-1");
    assert_int_equal(sim_state_allocated(&s, r), 2);
    dup = sim_pod_new("p1", &req, 1, NULL);
    assert_int_equal(sim_state_add_pod(&s, &dup, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "already exists"));
    sim_pod_free(dup);
    assert_int_equal(sim_state_delete_pod(&s, "p1"), 0);
    assert_int_equal(sim_state_delete_pod(&s, "p1"), -ENOENT);
    assert_int_equal(sim_state_allocated(&s, r), 1);
    assert_null(sim_state_find_pod(&s, "p1"));
    assert_non_null(sim_state_find_pod(&s, "p2"));
    sim_state_release(&s);
}

static void test_sim_state_pending_pod_holds_nothing(void **state)
{
    struct sim_state s = {0};
    struct sim_resource *r = add_resource(&s, "nvidia.com/gpu", 1, 0);
    struct sim_pod *p = running_pod(&s, "p1", "nvidia.com/gpu", "dev-0");

    assert_int_equal(sim_pod_set_phase(p, SIM_POD_FAILED, "UnexpectedAdmissionError", "x"), 0);
    assert_int_equal(sim_state_allocated(&s, r), 0);
    assert_string_equal(sim_pod_phase_name(p->phase), "Failed");
    sim_state_release(&s);
}

static void test_sim_resource_set_devices_replaces(void **state)
{
    struct sim_state s = {0};
    struct sim_resource *r = add_resource(&s, "nvidia.com/gpu", 3, 0);
    const char *ids[] = {"x"};
    bool healthy[] = {false};
    int64_t numa[] = {1};

    assert_int_equal(r->n_updates, 1);
    assert_int_equal(sim_resource_set_devices(r, ids, healthy, numa, 1, NULL), 0);
    assert_int_equal(r->n_updates, 2);
    assert_int_equal(sim_resource_capacity(r), 1);
    assert_int_equal(sim_resource_allocatable(r), 0);
    assert_string_equal(r->devices[0].id, "x");
    assert_int_equal(r->devices[0].numa_node, 1);
    assert_int_equal(sim_resource_set_devices(r, ids, healthy, numa, SIM_MAX_DEVICES + 1, NULL),
                     -E2BIG);
    assert_int_equal(sim_resource_capacity(r), 1); /* the last good list stays */
    sim_state_release(&s);
}

static void test_sim_out_text_views(void **state)
{
    struct sim_state s = {0};
    struct sim_resource *r = add_resource(&s, "nvidia.com/gpu", 3, 1);
    struct strbuf out = STRBUF_INIT;

    running_pod(&s, "p1", "nvidia.com/gpu", "dev-1");
    sim_out_capacity_text(&s, &out);
    assert_string_equal(strbuf_str(&out),
                        "RESOURCE        CAPACITY  ALLOCATABLE  ALLOCATED  PLUGIN\n"
                        "nvidia.com/gpu         3            2          1  disconnected\n");
    strbuf_reset(&out);
    sim_out_devices_text(&s, r, &out);
    assert_string_equal(strbuf_str(&out), "nvidia.com/gpu: 3 devices\n"
                                          "  dev-0  Unhealthy  numa=none\n"
                                          "  dev-1  Healthy  numa=none  pod=p1\n"
                                          "  dev-2  Healthy  numa=none\n");
    strbuf_reset(&out);
    sim_out_pod_text(sim_state_find_pod(&s, "p1"), false, &out);
    assert_string_equal(strbuf_str(&out), "pod/p1  Running  nvidia.com/gpu=dev-1\n");
    strbuf_release(&out);
    sim_state_release(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_cmd_parse_valid),
        cmocka_unit_test(test_sim_cmd_parse_requests),
        cmocka_unit_test(test_sim_cmd_parse_blank),
        cmocka_unit_test(test_sim_cmd_parse_invalid),
        cmocka_unit_test(test_sim_cmd_parse_long_line),
        cmocka_unit_test(test_sim_cmd_parse_long_name),
        cmocka_unit_test(test_sim_cmp_holds_table),
        cmocka_unit_test(test_sim_validate_registration_messages),
        cmocka_unit_test(test_sim_choose_devices_order),
        cmocka_unit_test(test_sim_state_capacity_allocatable),
        cmocka_unit_test(test_sim_state_delete_pod_frees_devices),
        cmocka_unit_test(test_sim_state_pending_pod_holds_nothing),
        cmocka_unit_test(test_sim_resource_set_devices_replaces),
        cmocka_unit_test(test_sim_out_text_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
