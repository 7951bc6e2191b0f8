/* cfg.h — the daemon's configuration from the command line and TRAIND_* environment variables. */
#ifndef TRAIND_DAEMON_CFG_H
#define TRAIND_DAEMON_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "log.h"

#define CFG_MAX_DATA_ROOTS 16
#define CFG_MAX_S3_ENDPOINTS 16
/* --gpus takes the N of cuda:N, 0 .. CFG_MAX_GPU_INDEX (one bit each in cfg.gpus). */
#define CFG_MAX_GPU_INDEX 63
#define CFG_ALL_GPUS UINT64_MAX
/* --predict-max-rows by default, and where no configuration is given. */
#define CFG_PREDICT_MAX_ROWS 100000

struct cfg {
    char listen[128];                 /* "127.0.0.1:8470", "[::1]:0" */
    char state_dir[4096];
    char cache_dir[4096];             /* downloaded partitions (object storage); empty: none */
    unsigned long long cache_limit;   /* bytes the cache may hold; 0: no limit */
    char port_file[4096];             /* empty: none */
    char *data_roots[CFG_MAX_DATA_ROOTS];   /* absolute, symlinks resolved */
    size_t n_data_roots;
    char *s3_endpoints[CFG_MAX_S3_ENDPOINTS]; /* --s3-endpoint: those a spec's data.endpoint may name */
    size_t n_s3_endpoints;
    char token_file[4096];            /* empty: no authentication */
    int cpu_workers;
    uint64_t gpus;                    /* --gpus: bit N set = traind uses cuda:N; CFG_ALL_GPUS by default */
    int request_timeout_s;            /* idle connections, and requests whose headers and body take longer */
    size_t predict_max_rows;          /* rows one POST /jobs/{id}/predict may send */
    int heartbeat_timeout_s;          /* a worker silent this long fails its job */
    int allreduce_timeout_s;          /* a replica waiting this long for a peer ends its job's run */
    unsigned long long response_memory_max;   /* bytes unsent response bodies may hold in all */
    unsigned long long model_max_bytes;       /* a spec's model's parameters, at its dtype */
    unsigned long long list_max_bytes;        /* a .list file or an S3 listing's XML, in all */
    unsigned long long list_max_keys;         /* the objects a listing may name */
    enum log_level log_level;
};

enum cfg_action { CFG_RUN, CFG_HELP, CFG_VERSION, CFG_DEVICES, CFG_SPEC_FIELDS, CFG_SPEC_SCHEMA, CFG_BENCH_ADD };

/*
 * Flags win over environment variables, which win over defaults. Returns 0 and
 * *action, or an error (ERR_INVALID_ARG) whose message says what was wrong.
 */
int cfg_parse(int argc, char **argv, struct cfg *c, enum cfg_action *action, struct err *e);
void cfg_free(struct cfg *c);

/*
 * May a job's spec send the daemon's S3 credentials to endpoint? Only to one the operator named:
 * the daemon's AWS_ENDPOINT_URL or a --s3-endpoint (a trailing '/' aside).
 */
bool cfg_s3_endpoint_allowed(const struct cfg *c, const char *endpoint);

/*
 * A data root that is the state directory, holds it or lies inside it would let a job read the
 * daemon's database and other jobs' checkpoints: ERR_INVALID_ARG saying which and what to do.
 */
int cfg_check_state_dir(const struct cfg *c, struct err *e);

/* Does the configuration let traind use cuda:index? */
bool cfg_uses_gpu(const struct cfg *c, int index);

/* The --help text. */
void cfg_usage(const char *prog, FILE *out);

#endif
