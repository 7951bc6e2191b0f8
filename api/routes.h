/* routes.h — the HTTP API as plain functions: a request in, a status and a JSON body out (no MHD here). */
#ifndef TRAIND_API_ROUTES_H
#define TRAIND_API_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cfg.h"
#include "db.h"
#include "devices.h"
#include "job.h"
#include "scheduler.h"

#define API_MAX_BODY (1024 * 1024)
#define API_MAX_STATUS 600

/* Counters the server keeps and GET /metrics shows. */
struct api_stats {
    uint64_t responses[API_MAX_STATUS];   /* by HTTP status code */
};

struct api_ctx {
    struct job_registry *reg;
    struct db *db;                        /* the metrics history is read from it */
    struct sched *sched;
    const struct devices_info *devices;   /* NULL: CPU only, no GPU discovery */
    const struct api_stats *stats;        /* set by the server */
    const struct cfg *cfg;                /* the S3 endpoints a spec may name (cfg_s3_endpoint_allowed);
                                             NULL: only the daemon's AWS_ENDPOINT_URL */
    const struct world *world;            /* under mpirun, the ranks (world.h); NULL: traind alone */
};

struct api_request {
    const char *method;
    const char *path;                 /* without the query string */
    const char *content_type;         /* NULL when absent */
    const char *body;                 /* NUL-terminated, body_len bytes */
    size_t body_len;
    const char *(*query)(void *qctx, const char *key);   /* NULL when absent */
    const char *(*query_key)(void *qctx, size_t i);      /* the i-th parameter's name; NULL past the last */
    void *qctx;
    int no_wait;                      /* answer now even if ?wait= asks to wait (a resumed request) */
};

struct api_response {
    unsigned status;
    json_t *body;                     /* owned by the response */
    char location[64];                /* Location header, or empty */
    const char *allow;                /* Allow header for 405, or NULL */
    /* Instead of body: text (owned, freed by the sender) of content_type ... */
    char *text;
    size_t text_len;
    const char *content_type;
    /* ... or a stream of content_type, rendered as it is sent (owned, freed by the sender) ... */
    struct hist_stream *stream;
    bool head;                        /* the answer to HEAD: the sender reads no stream */
    /* ... or a file to send (fd owned by the response), with a download name. */
    bool has_file;
    int file_fd;
    uint64_t file_size;
    char filename[96];
    /* Long poll: no body yet; park the request until job wait_job changes or wait_ms pass,
     * then route it again with no_wait set. */
    unsigned wait_ms;
    char wait_job[32];
    /* Work too slow for the loop thread (a prediction): the server runs deferred.run on a pool
     * thread, which fills this response in, and sends that. */
    struct api_deferred {
        void (*run)(void *arg, struct api_response *resp);   /* NULL: nothing deferred */
        void (*free)(void *arg);                              /* after run, or instead of it */
        void *arg;
    } deferred;
};

/* The most rows GET /jobs/{id}/metrics?limit= may ask for. */
#define API_METRICS_MAX_ROWS 100000

/* The longest ?wait= a request may ask for, in seconds. */
#define API_MAX_WAIT_S 60

/* Fills resp (always: errors are JSON too). */
void api_route(const struct api_ctx *ctx, const struct api_request *req, struct api_response *resp);

/*
 * Before any body is read: 0 if the method and path (req's body unused) lead somewhere that
 * takes a body when has_body; else -1 with the answer (404, 405, or 413 for a body where
 * none is taken) in resp.
 */
int api_route_admit(const struct api_request *req, bool has_body, struct api_response *resp);

/* {"error":{"code":...,"message":...}} with status; returns resp for chaining. */
struct api_response *api_error(struct api_response *resp, unsigned status, const char *code,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The body as sent: compact, reals with 17 significant digits, a trailing newline. */
char *api_dump(const json_t *body, size_t *len);

#endif
