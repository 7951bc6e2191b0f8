/* cfg.c — command-line flags and their TRAIND_* environment twins. */
#include "cfg.h"

#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

enum { OPT_LISTEN = 256, OPT_STATE, OPT_ROOT, OPT_WORKERS, OPT_LEVEL, OPT_PORTFILE, OPT_HELP, OPT_VERSION,
       OPT_TOKEN, OPT_TIMEOUT, OPT_CACHE, OPT_CACHE_LIMIT, OPT_HEARTBEAT, OPT_GPUS, OPT_S3_ENDPOINT,
       OPT_RESPONSE_MEMORY, OPT_MODEL_MAX, OPT_LIST_BYTES, OPT_LIST_KEYS, OPT_PREDICT_MAX_ROWS,
       OPT_ALLREDUCE_TIMEOUT };

void cfg_usage(const char *prog, FILE *out)
{
    fprintf(out,
"Usage: %s [OPTIONS]\n"
"       %s devices      print the CPU and GPUs traind would train on (as GET /devices)\n"
"       %s spec-fields  print the job spec's fields, defaults and accepted values (Markdown)\n"
"       %s spec-schema  print the job spec as a JSON Schema (docs/openapi.yaml's JobSpec)\n"
"       %s bench add    PyTorch's add benchmark: c = a + b on CPU and GPU, 2^0 .. 2^27 float64,\n"
"                       on the first GPU of --gpus\n"
"\n"
"traind trains models from CSV partitions and serves an HTTP/JSON API to submit\n"
"jobs and follow their metrics. Under mpirun (a build with Open MPI) rank 0 serves and\n"
"the other ranks train the replicas it places on their CPU workers (docs/cluster.md).\n"
"\n"
"Options (each also read from the environment variable in brackets):\n"
"  --listen HOST:PORT    address to serve on [TRAIND_LISTEN] (default 127.0.0.1:8470;\n"
"                        port 0 picks a free port; IPv6 as [::1]:8470)\n"
"  --state-dir DIR       where state is kept [TRAIND_STATE_DIR] (default ./traind-state)\n"
"  --cache-dir DIR       downloads and parsed partitions, shared by jobs [TRAIND_CACHE_DIR]\n"
"                        (default: none: downloads go to a temp file, each job parses)\n"
"  --cache-limit BYTES   the most the cache may hold, least recently used first out;\n"
"                        suffixes K, M, G, T [TRAIND_CACHE_LIMIT] (default: no limit)\n"
"  --data-root DIR       file:// reads are confined below DIR; repeatable\n"
"                        [TRAIND_DATA_ROOT, colon-separated] (default: none, so jobs read\n"
"                        no local files); none may be, hold or lie inside --state-dir, or\n"
"                        traind will not start\n"
"  --s3-endpoint URL     an S3-compatible endpoint a job's data.endpoint may name; the\n"
"                        daemon's AWS credentials go to no other (AWS_ENDPOINT_URL is\n"
"                        always allowed); repeatable [TRAIND_S3_ENDPOINT, comma-separated]\n"
"                        (default: none)\n"
"  --cpu-workers N       jobs trained at once on the CPU [TRAIND_CPU_WORKERS] (default 1)\n"
"  --gpus LIST           the GPUs traind trains on, by the N of cuda:N (0,2), or all or\n"
"                        none [TRAIND_GPUS] (default all); the others get no worker, no\n"
"                        CUDA context, and show in /devices with \"used\": false\n"
"  --log-level LEVEL     error, warn, info or debug [TRAIND_LOG_LEVEL] (default info)\n"
"  --port-file FILE      write the port actually bound to FILE [TRAIND_PORT_FILE]\n"
"  --token-file FILE     require 'Authorization: Bearer <the token in FILE>' on every\n"
"                        request but /healthz and the static page / [TRAIND_TOKEN_FILE];\n"
"                        FILE must not be readable by others (chmod 600)\n"
"  --request-timeout S   close a connection idle for S seconds, or one whose request\n"
"                        (headers and body) takes longer than S seconds to arrive\n"
"                        [TRAIND_REQUEST_TIMEOUT] (default 30; --http-timeout and\n"
"                        TRAIND_HTTP_TIMEOUT are its older names)\n"
"  --predict-max-rows N  the most rows one POST /jobs/ID/predict may send; more are\n"
"                        answered 413 [TRAIND_PREDICT_MAX_ROWS] (default 100000)\n"
"  --heartbeat-timeout S a job whose training thread shows no life for S seconds\n"
"                        fails (and systemd's watchdog is no longer fed)\n"
"                        [TRAIND_HEARTBEAT_TIMEOUT] (default 600)\n"
"  --allreduce-timeout S a job's replica that waits S seconds for another at an\n"
"                        all-reduce ends the run: the job goes back to the queue and\n"
"                        on from its latest checkpoint [TRAIND_ALLREDUCE_TIMEOUT]\n"
"                        (default 300; more than rank 0's longest evaluation)\n"
"  --response-memory-max BYTES  response bodies not yet read by their clients hold at\n"
"                        most this much, all connections together; past it a request\n"
"                        gets 503 with Retry-After [TRAIND_RESPONSE_MEMORY_MAX]\n"
"                        (default 256M; a streamed metrics page holds 96K)\n"
"  --model-max-bytes BYTES  a job whose model's parameters would take more is refused\n"
"                        with 400 [TRAIND_MODEL_MAX_BYTES] (default 4G)\n"
"  --list-max-bytes BYTES   a .list file or an S3 listing larger than this fails the job\n"
"                        [TRAIND_LIST_MAX_BYTES] (default 64M)\n"
"  --list-max-keys N     a .list file or an S3 listing with more objects fails the job\n"
"                        [TRAIND_LIST_MAX_KEYS] (default 1000000)\n"
"  --help                show this text\n"
"  --version             show the version\n"
"\n"
"Examples:\n"
"  %s --data-root /srv/dc-taxi\n"
"  curl -s -H 'Content-Type: application/json' -d '{\"data\":{\"train\":\"/srv/dc-taxi/part*.csv\"},\n"
"       \"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,\"iterations\":50}' \\\n"
"       http://127.0.0.1:8470/jobs\n"
"  curl -s http://127.0.0.1:8470/jobs/ID/metrics\n",
            prog, prog, prog, prog, prog, prog);
}

static int copy_str(char *dst, size_t cap, const char *src, const char *what, struct err *e)
{
    if (strlen(src) >= cap)
        return err_set(e, ERR_INVALID_ARG, "%s is too long", what);
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

static int add_root(struct cfg *c, const char *dir, struct err *e)
{
    if (c->n_data_roots == CFG_MAX_DATA_ROOTS)
        return err_set(e, ERR_INVALID_ARG, "at most %d data roots", CFG_MAX_DATA_ROOTS);
    char *abs = realpath(dir, NULL);
    if (!abs)
        return err_set(e, ERR_INVALID_ARG, "data root '%s' cannot be resolved: %m", dir);
    c->data_roots[c->n_data_roots++] = abs;
    return 0;
}

/* Each piece of list between seps through add: "a:b:c" -> three roots; empty pieces are skipped. */
static int add_each(struct cfg *c, const char *list, const char *seps,
                    int (*add)(struct cfg *, const char *, struct err *), struct err *e)
{
    char *copy = strdup(list);
    if (!copy)
        return err_set(e, ERR_NOMEM, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *p = strtok_r(copy, seps, &save); p && !rc; p = strtok_r(NULL, seps, &save))
        rc = add(c, p, e);
    free(copy);
    return rc;
}

static int add_endpoint(struct cfg *c, const char *url, struct err *e)
{
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return err_set(e, ERR_INVALID_ARG, "--s3-endpoint wants an http:// or https:// URL, got '%s'", url);
    if (c->n_s3_endpoints == CFG_MAX_S3_ENDPOINTS)
        return err_set(e, ERR_INVALID_ARG, "at most %d S3 endpoints", CFG_MAX_S3_ENDPOINTS);
    if (!(c->s3_endpoints[c->n_s3_endpoints] = strdup(url)))
        return err_set(e, ERR_NOMEM, "out of memory");
    c->n_s3_endpoints++;
    return 0;
}

/* Equal but for one trailing '/' on either side. */
static bool same_endpoint(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    na -= na > 0 && a[na - 1] == '/';
    nb -= nb > 0 && b[nb - 1] == '/';
    return na == nb && strncmp(a, b, na) == 0;
}

bool cfg_s3_endpoint_allowed(const struct cfg *c, const char *endpoint)
{
    const char *env = getenv("AWS_ENDPOINT_URL");
    if (env && *env && same_endpoint(env, endpoint))
        return true;
    for (size_t i = 0; c && i < c->n_s3_endpoints; i++)
        if (same_endpoint(c->s3_endpoints[i], endpoint))
            return true;
    return false;
}

/* HOST:PORT with a port in 0..65535; the HTTP server resolves the host when it binds. */
static int check_listen(const char *v, struct err *e)
{
    const char *colon = strrchr(v, ':');
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || colon == v || !colon[1] || *end || port < 0 || port > 65535)
        return err_set(e, ERR_INVALID_ARG, "--listen wants HOST:PORT (127.0.0.1:8470, [::1]:8470), got '%s'", v);
    return 0;
}

/* A whole number from 1 to max for flag. */
static int parse_count(const char *flag, const char *s, long max, long *out, struct err *e)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > max)
        return err_set(e, ERR_INVALID_ARG, "%s wants a number from 1 to %ld, got '%s'", flag, max, s);
    *out = v;
    return 0;
}

static int parse_workers(const char *s, int *out, struct err *e)
{
    long v;
    if (parse_count("--cpu-workers", s, 256, &v, e))
        return e->code;
    *out = (int)v;
    return 0;
}

/* "all", "none" or "0,2": one bit per GPU index; no empty pieces, no repeats. */
static int parse_gpus(const char *s, uint64_t *out, struct err *e)
{
    if (strcmp(s, "all") == 0 || strcmp(s, "none") == 0) {
        *out = s[0] == 'a' ? CFG_ALL_GPUS : 0;
        return 0;
    }
    uint64_t mask = 0;
    const char *p = s;
    for (;;) {
        char *end;
        long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (v < 0 || v > CFG_MAX_GPU_INDEX || (*end && *end != ','))
            return err_set(e, ERR_INVALID_ARG, "--gpus wants GPU numbers from 0 to %d separated "
                           "by commas (0,2), all or none, got '%s'", CFG_MAX_GPU_INDEX, s);
        if (mask & (UINT64_C(1) << v))
            return err_set(e, ERR_INVALID_ARG, "--gpus names GPU %ld twice in '%s'", v, s);
        mask |= UINT64_C(1) << v;
        if (!*end)
            break;
        p = end + 1;
    }
    *out = mask;
    return 0;
}

bool cfg_uses_gpu(const struct cfg *c, int index)
{
    return index >= 0 && index <= CFG_MAX_GPU_INDEX && (c->gpus >> index & 1);
}

static int parse_seconds(const char *flag, const char *s, long max, int *out, struct err *e)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > max)
        return err_set(e, ERR_INVALID_ARG, "%s wants seconds from 1 to %ld, got '%s'", flag, max, s);
    *out = (int)v;
    return 0;
}

static int parse_timeout(const char *s, int *out, struct err *e)
{
    return parse_seconds("--request-timeout", s, 3600, out, e);
}

static int parse_max_rows(const char *s, size_t *out, struct err *e)
{
    long v;
    if (parse_count("--predict-max-rows", s, 100000000, &v, e))
        return e->code;
    *out = (size_t)v;
    return 0;
}

static int parse_heartbeat(const char *s, int *out, struct err *e)
{
    return parse_seconds("--heartbeat-timeout", s, 86400, out, e);
}

static int parse_allreduce(const char *s, int *out, struct err *e)
{
    return parse_seconds("--allreduce-timeout", s, 86400, out, e);
}

/* "500M", "20G", "1048576": bytes, with binary suffixes; flag names it in the error. */
static int parse_bytes(const char *flag, const char *s, unsigned long long *out, struct err *e)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
    if (!*s || *s == '-' || *end || (shift && v > (~0ULL >> shift)))
        return err_set(e, ERR_INVALID_ARG, "%s wants bytes (like 1048576, 500M or 20G), got '%s'", flag, s);
    *out = v << shift;
    return 0;
}

/* The limits set in bytes or counts, each a flag and its environment twin (a minimum of 1). */
struct cfg_cap {
    int opt;
    const char *flag, *env;
    size_t offset;                    /* of its unsigned long long in struct cfg */
};

static const struct cfg_cap cfg_caps[] = {
    {OPT_RESPONSE_MEMORY, "--response-memory-max", "TRAIND_RESPONSE_MEMORY_MAX",
     offsetof(struct cfg, response_memory_max)},
    {OPT_MODEL_MAX, "--model-max-bytes", "TRAIND_MODEL_MAX_BYTES", offsetof(struct cfg, model_max_bytes)},
    {OPT_LIST_BYTES, "--list-max-bytes", "TRAIND_LIST_MAX_BYTES", offsetof(struct cfg, list_max_bytes)},
    {OPT_LIST_KEYS, "--list-max-keys", "TRAIND_LIST_MAX_KEYS", offsetof(struct cfg, list_max_keys)},
};

static int parse_cap(struct cfg *c, const struct cfg_cap *cap, const char *v, struct err *e)
{
    unsigned long long *out = (unsigned long long *)((char *)c + cap->offset);
    if (parse_bytes(cap->flag, v, out, e))
        return e->code;
    if (*out == 0)
        return err_set(e, ERR_INVALID_ARG, "%s must be at least 1, got '%s'", cap->flag, v);
    return 0;
}

static int parse_level(const char *s, enum log_level *out, struct err *e)
{
    if (log_level_parse(s, out))
        return err_set(e, ERR_INVALID_ARG, "--log-level wants error, warn, info or debug, got '%s'", s);
    return 0;
}

static int from_env(struct cfg *c, struct err *e)
{
    const char *v;
    if ((v = getenv("TRAIND_LISTEN")) && *v && copy_str(c->listen, sizeof c->listen, v, "TRAIND_LISTEN", e))
        return e->code;
    if ((v = getenv("TRAIND_STATE_DIR")) && *v &&
        copy_str(c->state_dir, sizeof c->state_dir, v, "TRAIND_STATE_DIR", e))
        return e->code;
    if ((v = getenv("TRAIND_CACHE_DIR")) && *v &&
        copy_str(c->cache_dir, sizeof c->cache_dir, v, "TRAIND_CACHE_DIR", e))
        return e->code;
    if ((v = getenv("TRAIND_CACHE_LIMIT")) && *v && parse_bytes("--cache-limit", v, &c->cache_limit, e))
        return err_prefix(e, "TRAIND_CACHE_LIMIT");
    for (size_t i = 0; i < sizeof cfg_caps / sizeof *cfg_caps; i++)
        if ((v = getenv(cfg_caps[i].env)) && *v && parse_cap(c, &cfg_caps[i], v, e))
            return err_prefix(e, "%s", cfg_caps[i].env);
    if ((v = getenv("TRAIND_PORT_FILE")) && *v &&
        copy_str(c->port_file, sizeof c->port_file, v, "TRAIND_PORT_FILE", e))
        return e->code;
    if ((v = getenv("TRAIND_TOKEN_FILE")) && *v &&
        copy_str(c->token_file, sizeof c->token_file, v, "TRAIND_TOKEN_FILE", e))
        return e->code;
    if ((v = getenv("TRAIND_HTTP_TIMEOUT")) && *v && parse_timeout(v, &c->request_timeout_s, e))
        return err_prefix(e, "TRAIND_HTTP_TIMEOUT");
    if ((v = getenv("TRAIND_REQUEST_TIMEOUT")) && *v && parse_timeout(v, &c->request_timeout_s, e))
        return err_prefix(e, "TRAIND_REQUEST_TIMEOUT");
    if ((v = getenv("TRAIND_PREDICT_MAX_ROWS")) && *v && parse_max_rows(v, &c->predict_max_rows, e))
        return err_prefix(e, "TRAIND_PREDICT_MAX_ROWS");
    if ((v = getenv("TRAIND_HEARTBEAT_TIMEOUT")) && *v && parse_heartbeat(v, &c->heartbeat_timeout_s, e))
        return err_prefix(e, "TRAIND_HEARTBEAT_TIMEOUT");
    if ((v = getenv("TRAIND_ALLREDUCE_TIMEOUT")) && *v && parse_allreduce(v, &c->allreduce_timeout_s, e))
        return err_prefix(e, "TRAIND_ALLREDUCE_TIMEOUT");
    if ((v = getenv("TRAIND_CPU_WORKERS")) && *v && parse_workers(v, &c->cpu_workers, e))
        return err_prefix(e, "TRAIND_CPU_WORKERS");
    if ((v = getenv("TRAIND_GPUS")) && *v && parse_gpus(v, &c->gpus, e))
        return err_prefix(e, "TRAIND_GPUS");
    if ((v = getenv("TRAIND_LOG_LEVEL")) && *v && parse_level(v, &c->log_level, e))
        return err_prefix(e, "TRAIND_LOG_LEVEL");
    return 0;
}

/* What a flag may be given more than once: seen tells whether flags named any, which then replace the
   environment's list. */
struct cfg_lists {
    bool roots, endpoints;
};

/* The environment's lists, where no flag gave one. No data root by default: the working
   directory would hold the state directory, and jobs could read it. */
static int lists_from_env(struct cfg *c, const struct cfg_lists *seen, struct err *e)
{
    const char *v = getenv("TRAIND_DATA_ROOT");
    int rc = 0;
    if (!seen->roots)
        rc = v && *v ? add_each(c, v, ":", add_root, e) : 0;
    v = getenv("TRAIND_S3_ENDPOINT");
    if (!rc && !seen->endpoints && v && *v && add_each(c, v, ",", add_endpoint, e))
        rc = err_prefix(e, "TRAIND_S3_ENDPOINT");
    return rc;
}

static void defaults(struct cfg *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->listen, "127.0.0.1:8470");
    strcpy(c->state_dir, "./traind-state");
    c->cpu_workers = 1;
    c->gpus = CFG_ALL_GPUS;
    c->request_timeout_s = 30;
    c->predict_max_rows = CFG_PREDICT_MAX_ROWS;
    c->heartbeat_timeout_s = 600;
    c->allreduce_timeout_s = 300;
    c->log_level = LOG_INFO;
    c->response_memory_max = 256ULL << 20;
    c->model_max_bytes = 4ULL << 30;
    c->list_max_bytes = STORE_LIST_MAX_BYTES;
    c->list_max_keys = STORE_LIST_MAX_KEYS;
}

static const struct option cfg_opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"state-dir", required_argument, NULL, OPT_STATE},
    {"data-root", required_argument, NULL, OPT_ROOT},
    {"s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT},
    {"cpu-workers", required_argument, NULL, OPT_WORKERS},
    {"gpus", required_argument, NULL, OPT_GPUS},
    {"log-level", required_argument, NULL, OPT_LEVEL},
    {"port-file", required_argument, NULL, OPT_PORTFILE},
    {"token-file", required_argument, NULL, OPT_TOKEN},
    {"cache-dir", required_argument, NULL, OPT_CACHE},
    {"cache-limit", required_argument, NULL, OPT_CACHE_LIMIT},
    {"heartbeat-timeout", required_argument, NULL, OPT_HEARTBEAT},
    {"allreduce-timeout", required_argument, NULL, OPT_ALLREDUCE_TIMEOUT},
    {"request-timeout", required_argument, NULL, OPT_TIMEOUT},
    {"http-timeout", required_argument, NULL, OPT_TIMEOUT},
    {"response-memory-max", required_argument, NULL, OPT_RESPONSE_MEMORY},
    {"model-max-bytes", required_argument, NULL, OPT_MODEL_MAX},
    {"list-max-bytes", required_argument, NULL, OPT_LIST_BYTES},
    {"list-max-keys", required_argument, NULL, OPT_LIST_KEYS},
    {"predict-max-rows", required_argument, NULL, OPT_PREDICT_MAX_ROWS},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* One flag o with value v (getopt's optarg) into c. */
static int apply_flag(struct cfg *c, int o, const char *v, struct cfg_lists *seen, struct err *e)
{
    switch (o) {
    case OPT_LISTEN: return copy_str(c->listen, sizeof c->listen, v, "--listen", e);
    case OPT_STATE: return copy_str(c->state_dir, sizeof c->state_dir, v, "--state-dir", e);
    case OPT_PORTFILE: return copy_str(c->port_file, sizeof c->port_file, v, "--port-file", e);
    case OPT_ROOT: seen->roots = true; return add_root(c, v, e);
    case OPT_S3_ENDPOINT: seen->endpoints = true; return add_endpoint(c, v, e);
    case OPT_WORKERS: return parse_workers(v, &c->cpu_workers, e);
    case OPT_GPUS: return parse_gpus(v, &c->gpus, e);
    case OPT_CACHE: return copy_str(c->cache_dir, sizeof c->cache_dir, v, "--cache-dir", e);
    case OPT_HEARTBEAT: return parse_heartbeat(v, &c->heartbeat_timeout_s, e);
    case OPT_ALLREDUCE_TIMEOUT: return parse_allreduce(v, &c->allreduce_timeout_s, e);
    case OPT_CACHE_LIMIT: return parse_bytes("--cache-limit", v, &c->cache_limit, e);
    case OPT_TOKEN: return copy_str(c->token_file, sizeof c->token_file, v, "--token-file", e);
    case OPT_TIMEOUT: return parse_timeout(v, &c->request_timeout_s, e);
    case OPT_PREDICT_MAX_ROWS: return parse_max_rows(v, &c->predict_max_rows, e);
    case OPT_LEVEL: return parse_level(v, &c->log_level, e);
    default:
        for (size_t i = 0; i < sizeof cfg_caps / sizeof *cfg_caps; i++)
            if (cfg_caps[i].opt == o)
                return parse_cap(c, &cfg_caps[i], v, e);
        return err_set(e, ERR_INTERNAL, "flag %d has no handler", o);
    }
}

/* The words after the flags: a subcommand, and nothing else. */
static int parse_words(int argc, char **argv, enum cfg_action *action, struct err *e)
{
    if (optind < argc && strcmp(argv[optind], "devices") == 0) {
        *action = CFG_DEVICES;
        optind++;
    } else if (optind < argc && strcmp(argv[optind], "spec-fields") == 0) {
        *action = CFG_SPEC_FIELDS;
        optind++;
    } else if (optind < argc && strcmp(argv[optind], "spec-schema") == 0) {
        *action = CFG_SPEC_SCHEMA;
        optind++;
    } else if (optind + 1 < argc && strcmp(argv[optind], "bench") == 0 &&
               strcmp(argv[optind + 1], "add") == 0) {
        *action = CFG_BENCH_ADD;
        optind += 2;
    }
    if (optind < argc)
        return err_set(e, ERR_INVALID_ARG, "unexpected argument '%s'", argv[optind]);
    return 0;
}

int cfg_parse(int argc, char **argv, struct cfg *c, enum cfg_action *action, struct err *e)
{
    defaults(c);
    *action = CFG_RUN;
    if (from_env(c, e))
        return e->code;
    struct cfg_lists seen = {false, false};
    optind = 1;
    opterr = 0;
    int o, rc = 0;
    while (!rc && (o = getopt_long(argc, argv, ":", cfg_opts, NULL)) != -1) {
        if (o == OPT_HELP || o == OPT_VERSION) {
            *action = o == OPT_HELP ? CFG_HELP : CFG_VERSION;
            return 0;
        }
        if (o == ':')
            rc = err_set(e, ERR_INVALID_ARG, "%s needs a value", argv[optind - 1]);
        else if (o == '?')
            rc = err_set(e, ERR_INVALID_ARG, "unknown option '%s'", argv[optind - 1]);
        else
            rc = apply_flag(c, o, optarg, &seen, e);
    }
    if (!rc)
        rc = parse_words(argc, argv, action, e);
    if (!rc)
        rc = check_listen(c->listen, e);
    if (!rc)
        rc = lists_from_env(c, &seen, e);
    if (rc)
        cfg_free(c);
    return rc;
}

/*
 * path made absolute with its symlinks resolved as far as it exists; the components that do not
 * exist yet (a state directory made at the first start) are appended as written.
 */
static int resolve_partly(const char *path, char *out, size_t cap, struct err *e)
{
    char head[PATH_MAX], resolved[PATH_MAX];
    if (snprintf(head, sizeof head, "%s", path) >= (int)sizeof head)
        return err_set(e, ERR_INVALID_ARG, "the path '%s' is too long", path);
    const char *rest = "";
    for (;;) {
        if (realpath(head, resolved))
            break;
        char *slash = strrchr(head, '/');
        if (!slash || slash == head) {
            rest = slash ? path : NULL;   /* NULL: path is relative, below "." */
            snprintf(head, sizeof head, "%s", slash ? "/" : ".");
            continue;
        }
        rest = path + (slash - head);
        *slash = '\0';
    }
    size_t n = strlen(resolved);
    if (n && resolved[n - 1] == '/')
        resolved[--n] = '\0';
    int w = rest ? snprintf(out, cap, "%s%s%s", resolved, rest[0] == '/' ? "" : "/", rest)
                 : snprintf(out, cap, "%s/%s", resolved, path);
    if (w < 0 || (size_t)w >= cap)
        return err_set(e, ERR_INVALID_ARG, "the path '%s' is too long", path);
    return 0;
}

int cfg_check_state_dir(const struct cfg *c, struct err *e)
{
    char state[PATH_MAX];
    if (resolve_partly(c->state_dir, state, sizeof state, e))
        return err_prefix(e, "--state-dir");
    for (size_t i = 0; i < c->n_data_roots; i++) {
        const char *root = c->data_roots[i];
        bool holds = store_path_below(state, root), inside = store_path_below(root, state);
        if (holds || inside)
            return err_set(e, ERR_INVALID_ARG, "the data root %s %s the state directory %s, so jobs could read "
                           "its database and checkpoints through file://; give --data-root the data's "
                           "directory, or --state-dir one outside every data root", root,
                           holds && inside ? "is" : holds ? "holds" : "is inside", state);
    }
    return 0;
}

void cfg_free(struct cfg *c)
{
    for (size_t i = 0; i < c->n_data_roots; i++)
        free(c->data_roots[i]);
    c->n_data_roots = 0;
    for (size_t i = 0; i < c->n_s3_endpoints; i++)
        free(c->s3_endpoints[i]);
    c->n_s3_endpoints = 0;
}
