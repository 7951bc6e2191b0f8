/* client.h — the integration tests' side of the wire: start traind, make HTTP requests, read JSON. */
#ifndef TRAIND_TESTS_CLIENT_H
#define TRAIND_TESTS_CLIENT_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

/* A running traind on 127.0.0.1:<port> with a scratch data root. */
struct daemon_proc {
    pid_t pid;
    int port;
    char dir[256];        /* mkdtemp: data root, port file, log */
};

/*
 * Starts $TRAIND_BIN with --listen 127.0.0.1:0 --port-file, --data-root dir and
 * --state-dir dir.state (daemon_state_dir) for a new scratch dir; waits for the port.
 */
bool daemon_start(struct daemon_proc *d);
/* d's --state-dir: beside its scratch dir, since traind refuses one inside a data root. */
void daemon_state_dir(const struct daemon_proc *d, char *out, size_t cap);
/* Starts it again on the same dir (and state) after a stop, with extra flags (NULL-terminated, may be NULL). */
bool daemon_spawn(struct daemon_proc *d, const char *const *extra);
/* The same, waiting up to timeout_s (daemon_spawn: 30) for the port; false if it does not come. */
bool daemon_spawn_wait(struct daemon_proc *d, const char *const *extra, double timeout_s);
/* SIGKILL, no chance to clean up (a crash). */
void daemon_kill(struct daemon_proc *d);
/* SIGTERM, then waits up to timeout_s; returns the exit status, or -1 if it had to be killed. */
int daemon_stop(struct daemon_proc *d, double timeout_s);
/* Whether the daemon's log (all its runs in this dir) has a line containing needle. */
bool daemon_log_contains(const struct daemon_proc *d, const char *needle);
/* Copies the daemon's log to stderr. */
void daemon_print_log(const struct daemon_proc *d);
/* Kills whatever is left and removes the scratch directory. */
void daemon_cleanup(struct daemon_proc *d);

struct http_reply {
    long status;
    char *body;           /* NUL-terminated */
    size_t body_len;      /* bytes in body, which may hold NULs (a checkpoint) */
    char *headers;        /* raw response headers */
    json_t *json;         /* parsed body, or NULL */
};

/* One request; content_type may be NULL (no header); body may be NULL. */
bool http(const struct daemon_proc *d, const char *method, const char *path,
          const char *content_type, const char *body, struct http_reply *r);
/* The same with one more request header ("Authorization: Bearer x"), or none when NULL. */
bool http_h(const struct daemon_proc *d, const char *method, const char *path,
            const char *content_type, const char *body, const char *header, struct http_reply *r);
void http_reply_free(struct http_reply *r);
/* The value of a response header (case-insensitive name) into buf, or NULL. */
const char *http_header(const struct http_reply *r, const char *name, char *buf, size_t cap);

/* A socket connected to d, or -1: for requests curl would not send (half sent, slow, never read). */
int raw_connect(const struct daemon_proc *d);
/* The status of the reply that starts on fd within timeout_s, or 0 (none, or the peer closed). */
long raw_read_status(int fd, double timeout_s);
/* Sends request on a new connection and closes it after raw_read_status; -1 if it cannot be sent. */
long raw_status(const struct daemon_proc *d, const char *request, double timeout_s);

/* Writes a DC-taxi-like dataset of rows rows in parts partitions under d->dir/sub with $GEN_DCTAXI. */
bool gen_dctaxi(const struct daemon_proc *d, const char *sub, int rows, int parts);
/* The same with gen-dctaxi's --seed (seed 0 is gen_dctaxi's data): a test set unlike the training set. */
bool gen_dctaxi_seed(const struct daemon_proc *d, const char *sub, int rows, int parts, int seed);

/* Runs $TRAIND_BIN with args (NULL-terminated) to completion; stdout+stderr into out (cap bytes). */
int run_traind(const char *const *args, char *out, size_t cap);

double now_s(void);
void sleep_ms(int ms);

#endif
