/* SPDX-License-Identifier: Apache-2.0 */
/* base: the few things every gpuslice module needs — the error type, the logger,
 * a bounded growable string buffer, strict number parsing, file helpers (read with a
 * size cap, atomic write) and monotonic time. Depends on libc only.
 * The logger's configuration is the one mutable global of the program. */
#ifndef GS_BASE_H
#define GS_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define GS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define GS_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* ---- errors ------------------------------------------------------------------------------ */

#define ERROR_MSG_MAX 1024

/* An error a user can act on: what failed, where, what to do. Functions return 0 or a
 * negative errno and, when `err` is not NULL, fill it. The function that knows the cause
 * writes the message; callers only add context in front with error_prefix(). */
struct error {
    int code;                /* negative errno, 0 when unset */
    char msg[ERROR_MSG_MAX]; /* NUL-terminated, truncated with "..." if too long */
};

/* Sets err (may be NULL) and returns `code` forced negative, so that a caller can write
 * `return error_set(err, -EINVAL, "...")`. */
int error_set(struct error *err, int code, const char *fmt, ...) GS_PRINTF(3, 4);
/* Puts "<context>: " in front of the message already in err. No-op when err is NULL. */
void error_prefix(struct error *err, const char *fmt, ...) GS_PRINTF(2, 3);
void error_clear(struct error *err);
/* error_set for a failed system call, in the manner of systemd's log_error_errno: the
 * message is fmt's text, ": ", then strerror(errnum); returns -errnum. Pass errno (read
 * before anything else can change it). */
int error_set_errno(struct error *err, int errnum, const char *fmt, ...) GS_PRINTF(3, 4);

/* ---- logging ----------------------------------------------------------------------------- */

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };
enum log_format { LOG_FORMAT_KLOG = 0, LOG_FORMAT_JSON };

/* Set once at startup, before threads. Defaults: info, klog, stderr. */
void log_setup(enum log_level level, enum log_format format, int fd);
bool log_enabled(enum log_level level);
/* Parses "error|warn|info|debug" (also klog verbosity "0".."10": ≥4 is debug). */
int log_level_parse(const char *s, enum log_level *ret);
int log_format_parse(const char *s, enum log_format *ret);
void log_emit(enum log_level level, const char *file, int line, const char *fmt, ...)
    GS_PRINTF(4, 5);

/* One line per event; key=value context in the message. The level is checked before the
 * arguments are formatted. */
#define GS_LOG(level, ...)                                                                         \
    do {                                                                                           \
        if (log_enabled(level))                                                                    \
            log_emit(level, __FILE__, __LINE__, __VA_ARGS__);                                      \
    } while (0)
#define log_error(...) GS_LOG(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) GS_LOG(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) GS_LOG(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) GS_LOG(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* ---- strbuf: growable, NUL-terminated, with a size cap ----------------------------------- */

struct strbuf {
    char *buf;      /* owned; NULL until the first append */
    size_t len;     /* bytes used, excluding the NUL */
    size_t alloc;   /* bytes allocated */
    size_t max_len; /* appends past this fail with -E2BIG; 0 means 64 MiB */
};

#define STRBUF_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0, 0                                                                              \
    }

int strbuf_append(struct strbuf *sb, const char *s, size_t n);
int strbuf_puts(struct strbuf *sb, const char *s);
int strbuf_putc(struct strbuf *sb, char c);
int strbuf_printf(struct strbuf *sb, const char *fmt, ...) GS_PRINTF(2, 3);
int strbuf_vprintf(struct strbuf *sb, const char *fmt, va_list ap);
/* Always returns a valid string ("" when empty); borrowed until the next append. */
const char *strbuf_str(const struct strbuf *sb);
/* Hands the buffer to the caller (free() it); sb is reset. Returns "" copy when empty,
 * NULL only when out of memory. */
char *strbuf_take(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
void strbuf_release(struct strbuf *sb);

/* ---- strings and numbers ----------------------------------------------------------------- */

/* strdup that returns NULL for NULL. */
char *str_dup(const char *s);
bool str_eq(const char *a, const char *b); /* NULL-safe */
bool str_startswith(const char *s, const char *prefix);
/* The text of a YAML single-quoted scalar from its source bytes src[start, end) (inside
 * the quotes): '' is a quote, line breaks fold (one is a space, n are n-1 newlines, blanks
 * around them go). Owned result, NULL on ENOMEM. Shared by every YAML reader because
 * libfyaml 0.7.12 leaks its buffer (4 KiB) and drops a character when it unescapes long
 * '' runs itself. */
char *str_yaml_single_quoted(const char *src, size_t start, size_t end);
bool str_endswith(const char *s, const char *suffix);
/* The value of one hex digit (0-9, a-f, A-F), or -1. */
int str_hex_digit(int c);
/* Copies at most size-1 bytes and always terminates; returns strlen(src) like strlcpy. */
size_t str_copy(char *dst, const char *src, size_t size);
/* Strict parsers: the whole string must be a number in range; no sign for unsigned.
 * Return 0, -EINVAL (not a number) or -ERANGE. *ret written only on success. */
int parse_int64(const char *s, int64_t *ret);
int parse_uint64(const char *s, uint64_t *ret);
int parse_uint(const char *s, unsigned *ret);
/* "true/false/1/0/yes/no/on/off" (case-insensitive). */
int parse_bool(const char *s, bool *ret);
/* DNS-1123 subdomain check on s[0..n): dot-separated labels of [a-z0-9-], each starting and
 * ending with [a-z0-9], at most 63 characters a label and 253 in all. Kubernetes uses it for
 * resource-name domains and names. */
bool str_dns_subdomain_valid(const char *s, size_t n);
/* Edit distance, used for "did you mean" hints. */
unsigned str_distance(const char *a, const char *b);

/* NULL-terminated owned string vectors. */
char **strv_new(void);
int strv_push(char ***strv, const char *s); /* copies s */
size_t strv_length(char *const *strv);
bool strv_contains(char *const *strv, const char *s);
void strv_free(char **strv);

/* ---- files ------------------------------------------------------------------------------- */

/* Reads a whole regular file of at most max_bytes. -EISDIR for a directory, -EFBIG when
 * larger. On success *ret_data is owned by the caller and NUL-terminated. */
int file_read_all(const char *path, size_t max_bytes, char **ret_data, size_t *ret_len,
                  struct error *err);
/* Writes through a temporary file in the same directory and rename(2): readers see the old
 * or the new content, never a mix. */
int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                      struct error *err);
bool path_is_dir(const char *path);
bool path_exists(const char *path);
/* A unix socket at path that accepts a connection now (someone serves it). */
bool path_socket_live(const char *path);
/* mkdir -p: creates path and its missing parents with mode; existing ones are fine. */
int path_mkdir_p(const char *path, mode_t mode, struct error *err);
/* rm -rf of a tree we created: depth first, symlinks removed and never followed, errors
 * ignored (what cannot be removed stays). */
void path_rm_tree(const char *path);

/* ---- child processes (proc.c) ------------------------------------------------------------ */

/* The environment of a child: this process's, with each "NAME=value" of set replacing NAME
 * (set is borrowed: it must outlive the array). The array is owned (free() it, not its
 * strings). NULL when out of memory. */
char **proc_env_with(const char *const *set, size_t n_set);
/* Starts file (searched in PATH when it has no '/') with argv and envp (NULL: this process's
 * environment), stdin from in_fd (-1: /dev/null), stdout and stderr to out_fd (-1: ours),
 * without fork(): safe from a threaded process. 0 with *ret_pid, or a negative errno
 * (-ENOENT, -EACCES when it cannot be run). */
int proc_spawn(const char *file, char *const *argv, char *const *envp, int in_fd, int out_fd,
               pid_t *ret_pid);

/* ---- run-time loading (dl.c) -------------------------------------------------------------- */

/* One symbol of a table: where its function pointer goes in the caller's struct. */
struct dl_symbol {
    const char *name;
    size_t offset;
    bool optional; /* absent: the slot is NULL and dl_load.missing hears of it */
};
#define DL_SYMBOL(type, field, symbol)                                                             \
    {                                                                                              \
        (symbol), offsetof(type, field), false                                                     \
    }

/* dlopens the first of names that loads (RTLD_NOW | RTLD_LOCAL) and resolves every symbol
 * into table (table_size bytes; only the symbols' slots are written). All or nothing: on
 * failure table is untouched, the library closed, and err says "cannot load <name>:
 * <dlerror>" (-ELIBACC) or "cannot load <name>: it has no <symbol>" (-ELIBBAD); callers add
 * their hint. *ret_handle (may be NULL: loaded for the life of the process) owns it. */
int dl_load_table(const char *const *names, size_t n_names, const struct dl_symbol *syms,
                  size_t n_syms, void *table, size_t table_size, void **ret_handle,
                  struct error *err);

/* The same with optional symbols and what a caller wants to know about a failure. */
struct dl_load {
    void (*missing)(void *ctx, const char *symbol); /* an optional symbol is absent */
    void *ctx;
    char why[256];       /* out, -ELIBACC: dlerror()'s text for the last name tried */
    const char *lacking; /* out, -ELIBBAD: the required symbol absent (syms' string) */
};
int dl_load_table_opt(const char *const *names, size_t n_names, const struct dl_symbol *syms,
                      size_t n_syms, void *table, size_t table_size, void **ret_handle,
                      struct dl_load *opt, struct error *err);

/* ---- time -------------------------------------------------------------------------------- */

uint64_t time_now_ns(void); /* CLOCK_MONOTONIC */
uint64_t time_now_ms(void);
/* *ts = now on `clock` + ms: the absolute deadline pthread_cond_timedwait and
 * pthread_timedjoin_np take (the clock must be the one the condition or call uses). */
void time_deadline(struct timespec *ts, clockid_t clock, unsigned ms);
/* The next wait of an exponential backoff: min_ms after none (cur_ms 0), then twice the last,
 * at most max_ms. */
unsigned backoff_next_ms(unsigned cur_ms, unsigned min_ms, unsigned max_ms);

#endif
