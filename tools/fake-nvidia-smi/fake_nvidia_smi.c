/* SPDX-License-Identifier: Apache-2.0 */
/* fake_nvidia_smi.c: a stand-in nvidia-smi for machines without a GPU, for the two calls
 * NVIDIA's DRA driver makes to share a GPU: `nvidia-smi -i <id> -c <mode>` and `nvidia-smi
 * compute-policy -i <id> --set-timeslice <0-3>`; `compute-policy [-i <id>] -l` prints what is
 * set. Each call is appended to FAKE_NVIDIA_SMI_LOG; the settings live in the text file
 * FAKE_NVIDIA_SMI_STATE (one line per device), so tests read them back. FAKE_NVIDIA_SMI_FAIL=1
 * fails every call. Anything else is refused with exit 2. docs/fake-nvml.md (fake nvidia-smi). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* nvidia-smi's return values (its man page) */
#define RC_OK 0
#define RC_FAILED 1
#define RC_INVALID_ARG 2
#define RC_NOT_FOUND 6

#define MAX_DEVICES 64
#define ID_MAX 96

struct device {
    char id[ID_MAX];
    int timeslice; /* 0 default, 1 short, 2 medium, 3 long */
    char mode[32]; /* DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED */
};

struct state {
    struct device devices[MAX_DEVICES];
    size_t n_devices;
};

/* What the command line asks for. */
struct request {
    enum { REQ_COMPUTE_MODE, REQ_SET_TIMESLICE, REQ_LIST } what;
    const char *ids; /* -i: comma-separated, NULL for all */
    const char *mode;
    int timeslice;
};

static int usage_error(const char *what)
{
    fprintf(stderr,
            "%s\nInvalid combination of input arguments. Please run 'nvidia-smi -h' for "
            "help.\n",
            what);
    return RC_INVALID_ARG;
}

static void log_call(int argc, char **argv)
{
    const char *path = getenv("FAKE_NVIDIA_SMI_LOG");
    char line[4096];
    size_t n = 0;
    if (!path || !*path)
        return;
    for (int i = 1; i < argc && n < sizeof(line) - 2; i++) {
        int w = snprintf(line + n, sizeof(line) - 1 - n, "%s%s", i > 1 ? " " : "", argv[i]);
        n = w < 0 ? n : n + (size_t)w;
    }
    if (n > sizeof(line) - 2)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, n); /* on failure a test reading the log sees it missing */
    (void)w;
    close(fd);
}

/* The compute modes nvidia-smi -c takes, by name or number. NULL when unknown. */
static const char *compute_mode(const char *arg)
{
    static const char *const names[][2] = {
        {"DEFAULT", "0"}, {"PROHIBITED", "2"}, {"EXCLUSIVE_PROCESS", "3"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
        if (strcmp(arg, names[i][0]) == 0 || strcmp(arg, names[i][1]) == 0)
            return names[i][0];
    return NULL;
}

/* "0".."3"; -1 otherwise */
static int timeslice(const char *arg)
{
    return arg[0] >= '0' && arg[0] <= '3' && !arg[1] ? arg[0] - '0' : -1;
}

/* Is argv[*i] option opt ("-i X", "--id X", "--id=X")? Then *ret is its value ("" when
 * missing) and *i moves past it. */
static bool option(int argc, char **argv, int *i, const char *opt, const char *long_opt,
                   const char **ret)
{
    size_t n = strlen(long_opt);
    if (strncmp(argv[*i], long_opt, n) == 0 && argv[*i][n] == '=') {
        *ret = argv[*i] + n + 1;
        return true;
    }
    if (strcmp(argv[*i], opt) != 0 && strcmp(argv[*i], long_opt) != 0)
        return false;
    *ret = *i + 1 < argc ? argv[++*i] : "";
    return true;
}

static int parse_compute_policy(int argc, char **argv, struct request *req)
{
    bool list = false, set = false;
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        if (option(argc, argv, &i, "-i", "--id", &v))
            req->ids = v;
        else if (option(argc, argv, &i, "--set-timeslice", "--set-timeslice", &v)) {
            req->timeslice = timeslice(v);
            if (req->timeslice < 0)
                return usage_error("Invalid timeslice value: expected 0 (default), 1 (short), "
                                   "2 (medium) or 3 (long).");
            set = true;
        } else if (strcmp(argv[i], "-l") == 0 || strcmp(argv[i], "--list") == 0)
            list = true;
        else
            return usage_error("Invalid argument for compute-policy.");
    }
    if (set == list)
        return usage_error("compute-policy needs one of --set-timeslice or -l.");
    if (req->ids && !*req->ids)
        return usage_error("Missing value for -i.");
    req->what = set ? REQ_SET_TIMESLICE : REQ_LIST;
    return RC_OK;
}

static int parse(int argc, char **argv, struct request *req)
{
    *req = (struct request){.timeslice = -1};
    if (argc >= 2 && strcmp(argv[1], "compute-policy") == 0)
        return parse_compute_policy(argc, argv, req);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (option(argc, argv, &i, "-i", "--id", &v))
            req->ids = v;
        else if (option(argc, argv, &i, "-c", "--compute-mode", &v)) {
            req->mode = compute_mode(v);
            if (!req->mode)
                return usage_error("Invalid compute mode: expected DEFAULT (0), PROHIBITED (2) "
                                   "or EXCLUSIVE_PROCESS (3).");
        } else
            return usage_error("This fake nvidia-smi only knows -i <id> -c <mode> and "
                               "compute-policy.");
    }
    if (!req->mode || !req->ids || !*req->ids)
        return usage_error("The fake nvidia-smi needs -i <id> -c <mode>.");
    req->what = REQ_COMPUTE_MODE;
    return RC_OK;
}

/* The next id of the comma-separated list at *p copied into buf (cut at ID_MAX - 1), *p moved
 * past it; false at the end of the list. */
static bool next_id(const char **p, char *buf)
{
    size_t n = *p ? strcspn(*p, ",") : 0;
    if (!*p || !**p)
        return false;
    snprintf(buf, ID_MAX, "%.*s", (int)n, *p);
    *p += n + ((*p)[n] == ',');
    return true;
}

/* ---- state: "<id> timeslice=<n> compute-mode=<MODE>" lines ------------------------------- */

static struct device *find(struct state *s, const char *id, bool add)
{
    for (size_t i = 0; i < s->n_devices; i++)
        if (strcmp(s->devices[i].id, id) == 0)
            return &s->devices[i];
    if (!add || s->n_devices == MAX_DEVICES || strlen(id) >= ID_MAX)
        return NULL;
    struct device *d = &s->devices[s->n_devices++];
    snprintf(d->id, sizeof(d->id), "%s", id);
    snprintf(d->mode, sizeof(d->mode), "DEFAULT");
    return d;
}

static void load(const char *path, struct state *s)
{
    FILE *f = fopen(path, "re");
    char id[ID_MAX], mode[32];
    int ts;
    if (!f)
        return;
    while (fscanf(f, "%95s timeslice=%d compute-mode=%31s", id, &ts, mode) == 3) {
        struct device *d = find(s, id, true);
        if (d) {
            d->timeslice = ts;
            snprintf(d->mode, sizeof(d->mode), "%s", mode);
        }
    }
    fclose(f);
}

static int save(const char *path, const struct state *s)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return -errno;
    for (size_t i = 0; i < s->n_devices; i++)
        fprintf(f, "%s timeslice=%d compute-mode=%s\n", s->devices[i].id, s->devices[i].timeslice,
                s->devices[i].mode);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return -errno;
    return 0;
}

/* An id nvidia-smi would take: an index, a GPU-/MIG- uuid or a PCI bus id; with
 * FAKE_NVIDIA_SMI_DEVICES set, one of the ids it lists. */
static bool known_id(const char *id)
{
    const char *known = getenv("FAKE_NVIDIA_SMI_DEVICES");
    size_t n = strlen(id);
    if (!n || n >= ID_MAX)
        return false;
    if (!known || !*known)
        return true;
    char buf[ID_MAX];
    for (const char *p = known; next_id(&p, buf);)
        if (strcmp(buf, id) == 0)
            return true;
    return false;
}

static int apply_one(struct state *s, const struct request *req, const char *id)
{
    struct device *d = find(s, id, true);
    if (!d)
        return RC_FAILED;
    if (req->what == REQ_COMPUTE_MODE) {
        snprintf(d->mode, sizeof(d->mode), "%s", req->mode);
        printf("Set compute mode to %s for GPU %s.\n", req->mode, id);
    } else {
        d->timeslice = req->timeslice;
        printf("Set timeslice to %d for GPU %s.\n", req->timeslice, id);
    }
    return RC_OK;
}

static void list(struct state *s, const char *ids)
{
    char buf[ID_MAX];
    if (!ids) {
        for (size_t i = 0; i < s->n_devices; i++)
            printf("GPU %s: timeslice %d, compute mode %s\n", s->devices[i].id,
                   s->devices[i].timeslice, s->devices[i].mode);
        return;
    }
    for (const char *p = ids; next_id(&p, buf);) {
        const struct device *d = find(s, buf, false);
        printf("GPU %s: timeslice %d, compute mode %s\n", buf, d ? d->timeslice : 0,
               d ? d->mode : "DEFAULT");
    }
}

/* Every id of req->ids known, or exit 6 as nvidia-smi does for a device it cannot find. */
static int check_ids(const char *ids)
{
    char buf[ID_MAX];
    for (const char *p = ids; next_id(&p, buf);) {
        if (!known_id(buf)) {
            fprintf(stderr, "No devices were found matching %s\n", buf);
            return RC_NOT_FOUND;
        }
    }
    return RC_OK;
}

static int run(const struct request *req)
{
    const char *path = getenv("FAKE_NVIDIA_SMI_STATE");
    char lock[4096], buf[ID_MAX];
    static struct state s;
    int rc = check_ids(req->ids), fd = -1;
    if (rc != RC_OK)
        return rc;
    if (!path || !*path) {
        fprintf(stderr, "fake nvidia-smi: set FAKE_NVIDIA_SMI_STATE to a file for its state\n");
        return RC_FAILED;
    }
    snprintf(lock, sizeof(lock), "%s.lock", path);
    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) < 0) {
        fprintf(stderr, "fake nvidia-smi: %s: %s\n", lock, strerror(errno));
        if (fd >= 0)
            close(fd);
        return RC_FAILED;
    }
    load(path, &s);
    if (req->what == REQ_LIST)
        list(&s, req->ids);
    for (const char *p = req->ids; req->what != REQ_LIST && rc == RC_OK && next_id(&p, buf);)
        rc = apply_one(&s, req, buf);
    if (rc == RC_OK && req->what != REQ_LIST && save(path, &s) < 0) {
        fprintf(stderr, "fake nvidia-smi: writing %s: %s\n", path, strerror(errno));
        rc = RC_FAILED;
    }
    if (rc == RC_OK && req->what != REQ_LIST)
        printf("All done.\n");
    close(fd);
    return rc;
}

int main(int argc, char **argv)
{
    struct request req;
    const char *fail = getenv("FAKE_NVIDIA_SMI_FAIL");
    log_call(argc, argv);
    if (fail && strcmp(fail, "1") == 0) {
        fprintf(stderr, "Failed to run nvidia-smi: Unknown Error (FAKE_NVIDIA_SMI_FAIL=1)\n");
        return RC_FAILED;
    }
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("fake nvidia-smi: -i <id> -c <mode>; compute-policy -i <id> --set-timeslice "
               "<0-3>; compute-policy [-i <id>] -l\n");
        return RC_OK;
    }
    int rc = parse(argc, argv, &req);
    return rc != RC_OK ? rc : run(&req);
}
