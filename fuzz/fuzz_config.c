/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_config.c: libFuzzer target for the config parser and validator. Feeds the bytes to
 * cfg_parse_buffer (with and without flag overrides), formats every diagnostic, and checks
 * that a config that loads prints and parses back to the same text. Also runs the small
 * value parsers on the bytes as a string. No crash, no leak, no invariant broken. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

static void round_trip(const struct cfg_config *cfg, enum cfg_format f)
{
    struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
    struct cfg_config *again = NULL;

    if (cfg_print(cfg, f, &a) < 0)
        abort();
    if (cfg_parse_buffer(a.buf, a.len, "printed", NULL, &again, NULL, NULL) < 0 ||
        cfg_print(again, f, &b) < 0 || strcmp(a.buf, b.buf) != 0) {
        fprintf(stderr, "round trip failed:\n%s\n---\n%s\n", a.buf, strbuf_str(&b));
        abort();
    }
    cfg_free(again);
    strbuf_release(&a);
    strbuf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cfg_overrides o;
    struct cfg_diags d = CFG_DIAGS_INIT;
    struct cfg_config *cfg = NULL;
    struct strbuf sb = STRBUF_INIT;
    struct cfg_device_ref ref;
    char *s;
    int64_t ms;
    int r;

    cfg_overrides_init(&o, CFG_BIN_PLUGIN);
    if (size > 0 && (data[0] & 1))
        (void)cfg_overrides_set(&o, "MPS_ROOT", "/run/nvidia/mps", NULL);
    r = cfg_parse_buffer((const char *)data, size, "fuzz.yaml", &o, &cfg, &d, NULL);
    if ((r == 0) != (cfg != NULL) || (r == 0 && d.n_errors != 0))
        abort();
    cfg_diags_format(&d, CFG_SEV_WARNING, &sb);
    cfg_diags_format(&d, CFG_SEV_ERROR, &sb);
    if (cfg) {
        cfg_summary(cfg, &sb);
        /* the printed form carries the overlaid mpsRoot, so it re-parses on its own */
        round_trip(cfg, CFG_FORMAT_YAML);
        round_trip(cfg, CFG_FORMAT_JSON);
    }
    cfg_free(cfg);
    cfg_diags_release(&d);
    strbuf_release(&sb);
    cfg_overrides_release(&o);

    s = strndup((const char *)data, size);
    if (s) {
        if (cfg_device_ref_parse(s, &ref, NULL) == 0)
            free(ref.uuid);
        (void)cfg_duration_parse_ms(s, &ms, NULL);
        (void)cfg_resource_name_valid(s, NULL);
        (void)cfg_config_name_valid(s, NULL);
        free(s);
    }
    return 0;
}
