/* SPDX-License-Identifier: Apache-2.0 */
/* claim.c: the parts of a ResourceClaim (resource.k8s.io v1/v1beta2/v1beta1, same field
 * names there) that prepare needs: identity, allocation results, the configs copied from
 * class and claim, and the pods it is reserved for. Valid JSON that jansson cannot hold as
 * it is (numbers beyond int64 or double, "\u0000" in a key, nesting past its limit) is
 * refused naming the field, or passed over inside another driver's opaque parameters, as
 * NVIDIA's driver (which never decodes those) does. Pure: parses JSON the caller fetched. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra.h"

#define CLAIM_PATH_MAX_BYTES 240  /* a field path in a message; longer ones end in "..." */
#define CLAIM_SCAN_MAX_DEPTH 4096 /* beyond jansson's 2048: the parse fails before */
#define CLAIM_MAX_BAD_NUMBERS 64  /* more numbers out of range: the claim is refused */

/* A string value holding "\u0000": C sees only what comes before it ("Long\u0000" would
 * read as "Long"), so no field takes one. */
static bool has_nul(const json_t *v)
{
    return json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v);
}

static int nul_error(const char *path, const char *key, struct error *err)
{
    return error_set(err, -EINVAL,
                     "ResourceClaim: %s%s%s contains a NUL character (\\u0000); no name, uid "
                     "or keyword may hold one",
                     path, *path && *key ? "." : "", key);
}

/* A string member; NULL and -EINVAL naming `path` when absent or not a string (optional
 * members: absent is 0 with *ret NULL). */
static int str_member(const json_t *obj, const char *key, bool required, const char *path,
                      char **ret, struct error *err)
{
    const json_t *v = json_object_get(obj, key);

    *ret = NULL;
    if (!v && !required)
        return 0;
    if (!json_is_string(v))
        return error_set(err, -EINVAL, "ResourceClaim: %s%s%s is %s; expected a string", path,
                         *path ? "." : "", key, v ? "not a string" : "missing");
    if (has_nul(v))
        return nul_error(path, key, err);
    *ret = str_dup(json_string_value(v));
    return *ret ? 0 : error_set(err, -ENOMEM, "out of memory");
}

/* consumedCapacity: {<capacity name>: <quantity>}; the names prepare acts on are read, the
 * others are left (the scheduler's bookkeeping). */
static int parse_consumed(const json_t *cc, const char *path, struct dra_result *res,
                          struct error *err)
{
    const char *mem = NULL, *cpu = NULL;
    uint64_t v = 0;
    int r;

    res->consumed_compute_pct = -1;
    if (!cc || json_is_null(cc))
        return 0;
    if (!json_is_object(cc))
        return error_set(err, -EINVAL,
                         "ResourceClaim: %s.consumedCapacity is not an object of quantities", path);
    const json_t *m = json_object_get(cc, DRA_CAPACITY_MEMORY);
    const json_t *c = json_object_get(cc, DRA_CAPACITY_COMPUTE);
    if ((m && !json_is_string(m)) || (c && !json_is_string(c)))
        return error_set(err, -EINVAL,
                         "ResourceClaim: %s.consumedCapacity.%s is not a quantity string", path,
                         m && !json_is_string(m) ? DRA_CAPACITY_MEMORY : DRA_CAPACITY_COMPUTE);
    mem = json_string_value(m);
    cpu = json_string_value(c);
    r = mem ? dra_quantity_parse(mem, &res->consumed_memory_bytes, err) : 0;
    if (r < 0) {
        error_prefix(err, "ResourceClaim: %s.consumedCapacity.%s", path, DRA_CAPACITY_MEMORY);
        return r;
    }
    r = cpu ? dra_quantity_parse(cpu, &v, err) : 0;
    if (r < 0) {
        error_prefix(err, "ResourceClaim: %s.consumedCapacity.%s", path, DRA_CAPACITY_COMPUTE);
        return r;
    }
    if (cpu && v > 100)
        return error_set(err, -EINVAL,
                         "ResourceClaim: %s.consumedCapacity.%s is %s, more than 100 (percent "
                         "of the GPU)",
                         path, DRA_CAPACITY_COMPUTE, cpu);
    if (cpu)
        res->consumed_compute_pct = (int64_t)v;
    return 0;
}

static int parse_result(const json_t *r, size_t idx, struct dra_result *res, struct error *err)
{
    static const char *const keys[] = {"request", "driver", "pool", "device"};
    char **dst[] = {&res->request, &res->driver, &res->pool, &res->device};
    char path[96];
    int rc;

    snprintf(path, sizeof(path), "status.allocation.devices.results[%zu]", idx);
    if (!json_is_object(r))
        return error_set(err, -EINVAL, "ResourceClaim: %s is not an object", path);
    for (size_t i = 0; i < GS_ARRAY_SIZE(keys); i++) {
        rc = str_member(r, keys[i], true, path, dst[i], err);
        if (rc < 0)
            return rc;
    }
    const json_t *admin = json_object_get(r, "adminAccess");
    if (admin && !json_is_boolean(admin) && !json_is_null(admin))
        return error_set(err, -EINVAL, "ResourceClaim: %s.adminAccess is not true or false", path);
    res->admin_access = json_is_true(admin);
    rc = str_member(r, "shareID", false, path, &res->share_id, err);
    if (rc == 0)
        rc = parse_consumed(json_object_get(r, "consumedCapacity"), path, res, err);
    return rc;
}

static int parse_requests(const json_t *reqs, const char *path, char ***ret, struct error *err)
{
    size_t i;
    const json_t *v;

    *ret = strv_new();
    if (!*ret)
        return error_set(err, -ENOMEM, "out of memory");
    if (!reqs)
        return 0;
    if (!json_is_array(reqs))
        return error_set(err, -EINVAL, "ResourceClaim: %s.requests is not a list", path);
    json_array_foreach(reqs, i, v)
    {
        if (!json_is_string(v))
            return error_set(err, -EINVAL, "ResourceClaim: %s.requests[%zu] is not a string", path,
                             i);
        if (has_nul(v)) {
            char key[32];
            snprintf(key, sizeof(key), "requests[%zu]", i);
            return nul_error(path, key, err);
        }
        if (strv_push(ret, json_string_value(v)) < 0)
            return error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

static int parse_config(const json_t *c, size_t idx, struct dra_claim_config *cfg,
                        struct error *err)
{
    char path[96], opath[112];
    const char *source;
    const json_t *opaque;
    int r;

    snprintf(path, sizeof(path), "status.allocation.devices.config[%zu]", idx);
    if (!json_is_object(c))
        return error_set(err, -EINVAL, "ResourceClaim: %s is not an object", path);
    source = json_string_value(json_object_get(c, "source"));
    if (has_nul(json_object_get(c, "source")))
        return nul_error(path, "source", err);
    if (str_eq(source, "FromClass"))
        cfg->source = DRA_SOURCE_CLASS;
    else if (str_eq(source, "FromClaim"))
        cfg->source = DRA_SOURCE_CLAIM;
    else
        return error_set(err, -EINVAL,
                         "ResourceClaim: %s.source is '%s'; expected FromClass or FromClaim", path,
                         source ? source : "(missing)");
    r = parse_requests(json_object_get(c, "requests"), path, &cfg->requests, err);
    if (r < 0)
        return r;
    opaque = json_object_get(c, "opaque");
    if (!opaque)
        return 0;
    snprintf(opath, sizeof(opath), "%s.opaque", path);
    r = str_member(opaque, "driver", true, opath, &cfg->driver, err);
    if (r < 0)
        return r;
    cfg->parameters = json_object_get(opaque, "parameters");
    if (!cfg->parameters)
        return error_set(err, -EINVAL, "ResourceClaim: %s.parameters is missing", opath);
    json_incref(cfg->parameters);
    return 0;
}

static int parse_reserved(const json_t *list, struct dra_claim *c, struct error *err)
{
    size_t i;
    const json_t *v;

    if (!json_is_array(list))
        return 0;
    c->reserved_for = calloc(json_array_size(list) + 1, sizeof(*c->reserved_for));
    if (!c->reserved_for)
        return error_set(err, -ENOMEM, "out of memory");
    json_array_foreach(list, i, v)
    {
        struct dra_pod_ref *p = &c->reserved_for[c->n_reserved_for];
        const char *res = json_string_value(json_object_get(v, "resource"));
        char path[64];
        snprintf(path, sizeof(path), "status.reservedFor[%zu]", i);
        for (size_t k = 0; k < 3; k++) {
            static const char *const keys[] = {"resource", "name", "uid"};
            if (has_nul(json_object_get(v, keys[k])))
                return nul_error(path, keys[k], err);
        }
        if (!str_eq(res, "pods"))
            continue;
        p->name = str_dup(json_string_value(json_object_get(v, "name")));
        p->uid = str_dup(json_string_value(json_object_get(v, "uid")));
        c->n_reserved_for++;
    }
    return 0;
}

static int parse_allocation(const json_t *devices, struct dra_claim *c, struct error *err)
{
    const json_t *results = json_object_get(devices, "results");
    const json_t *configs = json_object_get(devices, "config");
    size_t i;
    const json_t *v;
    int r;

    if (results && !json_is_array(results))
        return error_set(err, -EINVAL,
                         "ResourceClaim: status.allocation.devices.results is not a list");
    if (configs && !json_is_array(configs))
        return error_set(err, -EINVAL,
                         "ResourceClaim: status.allocation.devices.config is not a list");
    c->results = calloc(json_array_size(results) + 1, sizeof(*c->results));
    c->configs = calloc(json_array_size(configs) + 1, sizeof(*c->configs));
    if (!c->results || !c->configs)
        return error_set(err, -ENOMEM, "out of memory");
    json_array_foreach(results, i, v)
    {
        r = parse_result(v, i, &c->results[c->n_results++], err);
        if (r < 0)
            return r;
    }
    json_array_foreach(configs, i, v)
    {
        r = parse_config(v, i, &c->configs[c->n_configs++], err);
        if (r < 0)
            return r;
    }
    return 0;
}

int dra_claim_parse(const json_t *obj, struct dra_claim **ret, struct error *err)
{
    struct dra_claim *c = calloc(1, sizeof(*c));
    const json_t *md = json_object_get(obj, "metadata");
    const json_t *status = json_object_get(obj, "status");
    const json_t *alloc = json_object_get(status, "allocation");
    int r;

    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    if (!json_is_object(md)) {
        r = error_set(err, -EINVAL, "ResourceClaim: metadata is missing");
        goto out;
    }
    r = str_member(md, "uid", true, "metadata", &c->uid, err);
    if (r == 0)
        r = str_member(md, "name", true, "metadata", &c->name, err);
    if (r == 0)
        r = str_member(md, "namespace", false, "metadata", &c->namespace, err);
    if (r == 0 && json_is_object(alloc)) {
        c->allocated = true;
        r = parse_allocation(json_object_get(alloc, "devices"), c, err);
    }
    if (r == 0)
        r = parse_reserved(json_object_get(status, "reservedFor"), c, err);
    if (r < 0)
        goto out;
    *ret = c;
    c = NULL;
out:
    dra_claim_free(c);
    return r;
}

/* ---- JSON text jansson refuses ------------------------------------------------------------ */

/* Where a scan of the text stands: one frame per open object or array. */
struct frame {
    bool object, want_key;
    const char *key; /* raw, as written between the quotes */
    size_t key_len, index;
};

struct scan {
    const char *text;
    size_t n;
    struct frame *st;
    size_t depth, cap;
};

/* A number jansson cannot hold: an integer beyond int64, or a real beyond double. */
struct bad_number {
    char *path; /* owned: "status.allocation.devices.config[0].opaque.parameters.x" */
    char *text; /* owned: the number as written (cut to 40 bytes) */
    size_t offset, len;
};

struct bad_numbers {
    struct bad_number items[CLAIM_MAX_BAD_NUMBERS];
    size_t n;
    bool too_many;
};

static void bad_numbers_release(struct bad_numbers *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->items[i].path);
        free(b->items[i].text);
    }
    b->n = 0;
}

/* The field the scan stands in: "a.b[2].c", cut to CLAIM_PATH_MAX_BYTES; "" at the top. */
static int scan_path(const struct scan *s, struct strbuf *out)
{
    int r = 0;
    strbuf_reset(out);
    for (size_t i = 0; r == 0 && i < s->depth; i++) {
        const struct frame *f = &s->st[i];
        if (strlen(strbuf_str(out)) > CLAIM_PATH_MAX_BYTES)
            return strbuf_puts(out, "...");
        if (!f->object)
            r = strbuf_printf(out, "[%zu]", f->index);
        else if (f->key)
            r = strbuf_printf(out, "%s%.*s", i && strbuf_str(out)[0] ? "." : "",
                              (int)(f->key_len > 128 ? 128 : f->key_len), f->key);
    }
    return r;
}

/* Does the number token overflow what jansson parses (it refuses the whole text then)? */
static bool number_overflows(const char *tok, size_t len)
{
    static const char max_digits[] = "9223372036854775807";
    const char *d = tok + (tok[0] == '-');
    size_t nd = len - (size_t)(d - tok);
    bool integer = !memchr(tok, '.', len) && !memchr(tok, 'e', len) && !memchr(tok, 'E', len);
    char *copy;
    double v;

    if (integer) {
        if (nd != sizeof(max_digits) - 1)
            return nd > sizeof(max_digits) - 1;
        int c = memcmp(d, max_digits, nd);
        return c > 0 && !(tok[0] == '-' && memcmp(d, "9223372036854775808", nd) == 0);
    }
    copy = strndup(tok, len);
    if (!copy)
        return false;
    v = strtod(copy, NULL);
    free(copy);
    return isinf(v);
}

static int note_number(struct scan *s, struct bad_numbers *bad, size_t start, size_t len)
{
    struct strbuf path = STRBUF_INIT;
    struct bad_number *b;
    int r;

    if (!number_overflows(s->text + start, len))
        return 0;
    if (bad->n == CLAIM_MAX_BAD_NUMBERS) {
        bad->too_many = true;
        return 0;
    }
    b = &bad->items[bad->n];
    r = scan_path(s, &path);
    b->path = r == 0 ? strbuf_take(&path) : NULL;
    b->text = strndup(s->text + start, len > 40 ? 40 : len);
    b->offset = start;
    b->len = len;
    bad->n++;
    strbuf_release(&path);
    return b->path && b->text ? 0 : -ENOMEM;
}

/* Scans text up to byte `stop`, leaving in s the frames that hold that position, and notes
 * the numbers jansson cannot hold in bad (NULL: none noted). Tolerates text that is not JSON
 * (jansson tells that), never reads past s->n. -ENOMEM, -E2BIG past CLAIM_SCAN_MAX_DEPTH. */
static int scan_json(struct scan *s, size_t stop, struct bad_numbers *bad)
{
    size_t i = 0;
    int r = 0;

    s->depth = 0;
    while (r == 0 && i < stop && i < s->n) {
        char ch = s->text[i];
        struct frame *top = s->depth ? &s->st[s->depth - 1] : NULL;
        if (ch == '{' || ch == '[') {
            if (s->depth == CLAIM_SCAN_MAX_DEPTH)
                return -E2BIG;
            if (s->depth == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 16;
                struct frame *st = realloc(s->st, cap * sizeof(*st));
                if (!st)
                    return -ENOMEM;
                s->st = st;
                s->cap = cap;
            }
            s->st[s->depth++] = (struct frame){.object = ch == '{', .want_key = ch == '{'};
            i++;
        } else if (ch == '}' || ch == ']') {
            s->depth -= s->depth > 0;
            i++;
        } else if (ch == ',') {
            if (top && top->object)
                *top = (struct frame){.object = true, .want_key = true};
            else if (top)
                top->index++;
            i++;
        } else if (ch == ':') {
            if (top && top->object)
                top->want_key = false;
            i++;
        } else if (ch == '"') {
            size_t start = ++i;
            while (i < s->n && s->text[i] != '"')
                i += s->text[i] == '\\' ? 2 : 1;
            if (top && top->object && top->want_key) {
                top->key = s->text + start;
                top->key_len = (i < s->n ? i : s->n) - start;
            }
            i++;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t start = i;
            while (i < s->n && s->text[i] && strchr("+-.0123456789eE", s->text[i]))
                i++;
            if (bad)
                r = note_number(s, bad, start, i - start);
        } else {
            i++;
        }
    }
    return r;
}

/* text with each noted number written as a string ("1e999" -> "\"1e999\""): jansson then
 * parses the rest, and the caller decides what the numbers were for. Owned, in *ret. */
static int quote_numbers(const char *text, size_t n, const struct bad_numbers *bad,
                         struct strbuf *ret)
{
    size_t at = 0;
    int r = 0;
    for (size_t i = 0; r == 0 && i < bad->n; i++) {
        r = strbuf_append(ret, text + at, bad->items[i].offset - at);
        if (r == 0)
            r = strbuf_putc(ret, '"');
        if (r == 0)
            r = strbuf_append(ret, text + bad->items[i].offset, bad->items[i].len);
        if (r == 0)
            r = strbuf_putc(ret, '"');
        at = bad->items[i].offset + bad->items[i].len;
    }
    return r == 0 ? strbuf_append(ret, text + at, n - at) : r;
}

/* jansson's refusal, with the field it stood in when it gave up. */
static int not_json(const char *text, size_t n, const json_error_t *je, struct error *err)
{
    struct scan s = {.text = text, .n = n};
    struct strbuf path = STRBUF_INIT;
    int r = scan_json(&s, (size_t)je->position, NULL);
    if (r == 0)
        r = scan_path(&s, &path);
    if (r == 0 && strbuf_str(&path)[0] &&
        (json_error_code(je) == json_error_null_byte_in_key ||
         json_error_code(je) == json_error_stack_overflow ||
         json_error_code(je) == json_error_numeric_overflow))
        error_set(err, -EINVAL, "ResourceClaim: %s: %s (line %d column %d)", strbuf_str(&path),
                  je->text, je->line, je->column);
    else if (r == 0 && strbuf_str(&path)[0])
        error_set(err, -EINVAL, "ResourceClaim: not JSON at %s (line %d column %d): %s",
                  strbuf_str(&path), je->line, je->column, je->text);
    else
        error_set(err, -EINVAL, "ResourceClaim: not JSON (line %d column %d): %s", je->line,
                  je->column, je->text);
    free(s.st);
    strbuf_release(&path);
    return -EINVAL;
}

/* The index i of a path inside "status.allocation.devices.config[i].opaque.parameters",
 * with *rel the rest after "parameters" ("" or ".x" or "[0]"); false elsewhere. */
static bool in_parameters(const char *path, size_t *ret_index, const char **rel)
{
    static const char prefix[] = "status.allocation.devices.config[";
    static const char tail[] = "].opaque.parameters";
    char *end;
    unsigned long long i;

    if (strncmp(path, prefix, sizeof(prefix) - 1) != 0)
        return false;
    i = strtoull(path + sizeof(prefix) - 1, &end, 10);
    if (end == path + sizeof(prefix) - 1 || strncmp(end, tail, sizeof(tail) - 1) != 0)
        return false;
    end += sizeof(tail) - 1;
    if (*end && *end != '.' && *end != '[')
        return false;
    *ret_index = (size_t)i;
    *rel = *end == '.' ? end + 1 : end;
    return true;
}

/* A number jansson could not hold matters where this driver reads it: anywhere but another
 * driver's opaque parameters and the drivers' own status.devices data. */
static int check_numbers(const struct dra_claim *c, const struct bad_numbers *bad,
                         struct error *err)
{
    for (size_t k = 0; k < bad->n; k++) {
        const struct bad_number *b = &bad->items[k];
        const char *rel = "";
        size_t i;
        if (str_startswith(b->path, "status.devices[") || str_eq(b->path, "status.devices"))
            continue;
        if (!in_parameters(b->path, &i, &rel))
            return error_set(err, -EINVAL,
                             "ResourceClaim: %s: the number %s is out of range (an integer "
                             "beyond -2^63..2^63-1 or a number beyond a double)",
                             b->path, b->text);
        if (i < c->n_configs && c->configs[i].driver &&
            strcmp(c->configs[i].driver, DRA_DRIVER_NAME) != 0)
            continue;
        return error_set(err, -EINVAL,
                         "ResourceClaim %s/%s: status.allocation.devices.config[%zu] (opaque "
                         "config for %s): %s: the number %s is out of range (an integer beyond "
                         "-2^63..2^63-1 or a number beyond a double); no field of GpuConfig or "
                         "MigDeviceConfig takes it",
                         c->namespace ? c->namespace : "", c->name, i, DRA_DRIVER_NAME,
                         *rel ? rel : "parameters", b->text);
    }
    if (bad->too_many)
        return error_set(err, -EINVAL,
                         "ResourceClaim %s/%s: more than %d numbers out of range (beyond "
                         "int64 or double): refusing the claim",
                         c->namespace ? c->namespace : "", c->name, CLAIM_MAX_BAD_NUMBERS);
    return 0;
}

int dra_claim_parse_text(const char *text, size_t n, struct dra_claim **ret, struct error *err)
{
    struct bad_numbers *bad = calloc(1, sizeof(*bad));
    struct scan s = {.text = text, .n = n};
    struct strbuf quoted = STRBUF_INIT;
    struct dra_claim *c = NULL;
    json_t *obj = NULL;
    json_error_t je;
    int r = bad ? scan_json(&s, n, bad) : -ENOMEM;

    if (r == -E2BIG) {
        r = error_set(err, -EINVAL, "ResourceClaim: nested more than %d levels deep",
                      CLAIM_SCAN_MAX_DEPTH);
        goto out;
    }
    if (r == 0 && bad->n)
        r = quote_numbers(text, n, bad, &quoted);
    if (r < 0) {
        r = error_set(err, r, "out of memory");
        goto out;
    }
    if (bad->n) {
        text = strbuf_str(&quoted);
        n = strlen(text);
    }
    /* "\u0000" in a string is valid JSON: taken, and refused where a field is read */
    obj = json_loadb(text, n, JSON_ALLOW_NUL, &je);
    if (!obj) {
        r = not_json(text, n, &je, err);
        goto out;
    }
    r = dra_claim_parse(obj, &c, err);
    if (r == 0)
        r = check_numbers(c, bad, err);
    if (r == 0) {
        *ret = c;
        c = NULL;
    }
out:
    dra_claim_free(c);
    json_decref(obj);
    if (bad)
        bad_numbers_release(bad);
    free(bad);
    free(s.st);
    strbuf_release(&quoted);
    return r;
}

void dra_claim_free(struct dra_claim *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_results; i++) {
        free(c->results[i].request);
        free(c->results[i].driver);
        free(c->results[i].pool);
        free(c->results[i].device);
        free(c->results[i].share_id);
    }
    for (size_t i = 0; i < c->n_configs; i++) {
        strv_free(c->configs[i].requests);
        free(c->configs[i].driver);
        json_decref(c->configs[i].parameters);
    }
    for (size_t i = 0; i < c->n_reserved_for; i++) {
        free(c->reserved_for[i].name);
        free(c->reserved_for[i].uid);
    }
    free(c->results);
    free(c->configs);
    free(c->reserved_for);
    free(c->uid);
    free(c->name);
    free(c->namespace);
    free(c);
}
