/*
 * state.c — the daemon's state history at scale: N metrics rows of one job written through
 * the daemon's own writer (db.h), then the real traind started on them: bytes per iteration on
 * disk, restart to the first 200 from /healthz, a downsampled metrics read, and how long a
 * DELETE of that job holds up /healthz. Figures as measured beside their goals; never asserts.
 *   build/bench/state [--rows N] [--restarts K] [--traind PATH]
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "buf.h"
#include "client.h"
#include "db.h"
#include "job.h"
#include "spec.h"

#define METRICS_REPEATS 20
#define DELETE_WINDOW_S 2.0
#define MAX_PROBES 20000          /* /healthz round trips kept during the DELETE window */

struct opts {
    int64_t rows;
    int restarts;
    const char *traind;
};

/* Figures for the summary. */
struct figures {
    double restart_med, bytes_per_it, metrics_med, stall_max;
};

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v in place; returns its median (v[0] is then the min). */
static double sort_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    if (n == 0)
        return NAN;
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Writing the history ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)   /* xorshift64* */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static double noise(uint64_t *s)   /* uniform in [-0.5, 0.5) */
{
    return (double)(rng_next(s) >> 11) * 0x1p-53 - 0.5;
}

/* A training run's row i: ~1 ms steps, a loss decaying with noise, an evaluation every 1000th. */
static struct metrics_row fake_row(int64_t i, double *t, uint64_t *rng)
{
    double spi = 1e-3 * (1 + 0.2 * noise(rng));
    double decay = 1 / (1 + (double)i * 1e-4);
    double loss = (0.05 + 2.0 * decay) * (1 + 0.1 * noise(rng));
    *t += spi;
    struct metrics_row r = {.v = {
        [METRIC_ITERATION] = (double)i, [METRIC_TIME] = *t, [METRIC_LOSS] = loss,
        [METRIC_SECONDS_PER_ITERATION] = spi, [METRIC_SAMPLES_PER_SECOND] = 1024 / spi,
        [METRIC_DATA_WAIT_SECONDS] = 2e-5 * (0.5 + noise(rng)),
        [METRIC_GRAD_NORM] = 1.5 * decay * (1 + 0.2 * noise(rng)), [METRIC_LR] = 0.03,
        [METRIC_EVAL_LOSS] = i % 1000 == 0 ? loss * 1.05 : NAN}};
    return r;
}

static struct job_spec *linear_spec(int64_t iterations)
{
    char text[256];
    snprintf(text, sizeof text,
             "{\"name\":\"bench-state\",\"data\":{\"train\":\"unused.csv\"},"
             "\"model\":{\"type\":\"linear\"},\"iterations\":%" PRId64 "}", iterations);
    json_t *root = json_loads(text, 0, NULL);
    struct job_spec *s = NULL;
    struct spec_error se;
    if (!root || spec_parse(root, &s, &se)) {
        fprintf(stderr, "state: the job spec is refused: %s: %s\n", root ? se.field : "json",
                root ? se.message : "does not parse");
        s = NULL;
    }
    json_decref(root);
    return s;
}

/* Appends rows rows to j, flushing as the daemon does: a full batch, or 200 ms since the last. */
static int append_rows(struct db *d, struct job *j, int64_t rows, struct err *e)
{
    uint64_t rng = 0x9e3779b97f4a7c15u;
    double t = 1.7e9, last_flush = now_s();
    for (int64_t i = 0; i < rows; i++) {
        struct metrics_row r = fake_row(i, &t, &rng);
        if (job_append_metrics(j, &r, e))
            return -1;
        if (db_pending_rows(d) >= DB_FLUSH_ROWS || now_s() - last_flush >= 0.2) {
            if (db_flush(d, e))
                return -1;
            last_flush = now_s();
        }
    }
    return db_flush(d, e);
}

/* One succeeded job with rows metrics rows in state/traind.db; its id into id. */
static int write_history(const char *state, int64_t rows, char id[32])
{
    struct err e = {0};
    struct db *d = NULL;
    struct job_registry *r = NULL;
    struct job_spec *spec = linear_spec(rows);
    if (!spec || db_open(state, &d, &e) || !(r = job_registry_new(&e)))
        goto fail;
    db_attach(d, r);
    struct job *j = job_registry_add(r, spec, &e);
    spec = NULL;
    if (!j)
        goto fail;
    snprintf(id, 32, "%s", job_id(j));
    job_mark_running(j, "cpu");
    double t0 = now_s();
    if (append_rows(d, j, rows, &e))
        goto fail;
    job_finish(j, ERR_OK, NULL, NULL);
    double t1 = now_s();
    db_close(d);   /* the last connection's close checkpoints the WAL */
    double t2 = now_s();
    job_registry_free(r);
    printf("write: %" PRId64 " rows in %.2f s, %.0f rows/s; close %.3f s\n", rows, t1 - t0,
           (double)rows / (t1 - t0), t2 - t1);
    return 0;
fail:
    fprintf(stderr, "state: writing the history: %s\n", e.msg);
    spec_free(spec);
    if (d)
        db_close(d);
    job_registry_free(r);
    return -1;
}

static int64_t file_size(const char *state, const char *name)
{
    char path[400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", state, name);
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

static double bytes_per_iteration(const char *state, int64_t rows)
{
    int64_t db = file_size(state, "traind.db"), wal = file_size(state, "traind.db-wal"),
            shm = file_size(state, "traind.db-shm");
    double per = (double)(db + wal + shm) / (double)rows;
    printf("disk: traind.db %" PRId64 " + -wal %" PRId64 " + -shm %" PRId64
           " bytes = %.1f bytes/iteration\n", db, wal, shm, per);
    return per;
}

/* HTTP on one kept-alive connection -------------------------------------------------------- */

struct conn {
    CURL *c;
    int port;
    char *body;                /* the last answer's body, NUL-terminated */
    size_t len, cap;
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct conn *k = ud;
    return buf_append(&k->body, &k->len, &k->cap, ptr, size * nmemb) ? 0 : size * nmemb;
}

static int conn_open(struct conn *k, int port)
{
    memset(k, 0, sizeof *k);
    k->port = port;
    if (!(k->c = curl_easy_init()))
        return -1;
    curl_easy_setopt(k->c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(k->c, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(k->c, CURLOPT_TIMEOUT, 120L);
    return 0;
}

static void conn_close(struct conn *k)
{
    curl_easy_cleanup(k->c);
    free(k->body);
}

/* The answer's status, or -1 when no answer came (said on stderr). */
static long conn_request(struct conn *k, const char *method, const char *path)
{
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", k->port, path);
    k->len = 0;
    curl_easy_setopt(k->c, CURLOPT_URL, url);
    curl_easy_setopt(k->c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = curl_easy_perform(k->c);
    long status = -1;
    if (rc == CURLE_OK)
        curl_easy_getinfo(k->c, CURLINFO_RESPONSE_CODE, &status);
    else
        fprintf(stderr, "state: %s %s: %s\n", method, path, curl_easy_strerror(rc));
    return status;
}

/* Restarts ---------------------------------------------------------------------------------- */

/* Starts traind on d's state and waits for the first 200 from /healthz; seconds since the fork. */
static double start_until_healthy(struct daemon_proc *d)
{
    /* daemon_spawn asks for debug logging; a later flag wins, and info is traind's default. */
    static const char *const level[] = {"--log-level", "info", NULL};
    double t0 = now_s();
    if (!daemon_spawn_wait(d, level, 600)) {
        fprintf(stderr, "state: traind did not write its port file (log: %s/traind.log)\n", d->dir);
        return -1;
    }
    struct conn k;
    if (conn_open(&k, d->port))
        return -1;
    double dt = -1;
    while (now_s() - t0 < 600) {
        if (conn_request(&k, "GET", "/healthz") == 200) {
            dt = now_s() - t0;
            break;
        }
        sleep_s(1e-3);
    }
    conn_close(&k);
    return dt;
}

/* K starts, stopped with SIGTERM between; the last one stays up. */
static int time_restarts(struct daemon_proc *d, int k, struct figures *f)
{
    double *t = calloc((size_t)k, sizeof *t);
    if (!t)
        return -1;
    for (int i = 0; i < k; i++) {
        if (i > 0 && daemon_stop(d, 120) != 0)
            fprintf(stderr, "state: traind did not exit 0 on SIGTERM\n");
        if ((t[i] = start_until_healthy(d)) < 0) {
            free(t);
            return -1;
        }
        printf("restart %d: %.3f s to the first 200 from /healthz\n", i + 1, t[i]);
    }
    f->restart_med = sort_median(t, (size_t)k);
    printf("restart to /healthz over %d starts: min %.3f s, median %.3f s\n", k, t[0],
           f->restart_med);
    free(t);
    return 0;
}

/* Metrics reads ----------------------------------------------------------------------------- */

/* What an answer held: its row count and first and last iterations. */
static void describe_rows(const char *body)
{
    json_t *root = json_loads(body, 0, NULL);
    json_t *rows = json_object_get(root, "rows");
    size_t n = json_array_size(rows);
    if (n == 0) {
        printf("    answer: no rows\n");
    } else {
        double first = json_number_value(json_array_get(json_array_get(rows, 0), 0));
        double last = json_number_value(json_array_get(json_array_get(rows, n - 1), 0));
        printf("    answer: %zu rows, iterations %.0f .. %.0f\n", n, first, last);
    }
    json_decref(root);
}

/* METRICS_REPEATS reads of path; the median's seconds, or -1. */
static double time_metrics(struct conn *k, const char *path, const char *note)
{
    double t[METRICS_REPEATS];
    for (int i = 0; i < METRICS_REPEATS; i++) {
        double t0 = now_s();
        if (conn_request(k, "GET", path) != 200) {
            fprintf(stderr, "state: GET %s: %s\n", path, k->body ? k->body : "");
            return -1;
        }
        t[i] = now_s() - t0;
    }
    double med = sort_median(t, METRICS_REPEATS);
    printf("GET %s (%s): min %.2f ms, median %.2f ms over %d, %zu bytes\n", path, note, t[0] * 1e3,
           med * 1e3, METRICS_REPEATS, k->len);
    describe_rows(k->body);
    return med;
}

/* DELETE against a /healthz poller ------------------------------------------------------------ */

struct poller {
    int port;
    atomic_bool stop;
    size_t n;
    double start[MAX_PROBES], rtt[MAX_PROBES];
};

/* GET /healthz every 1 ms over its own kept-alive connection, each round trip recorded. */
static void *poll_healthz(void *arg)
{
    struct poller *p = arg;
    struct conn k;
    if (conn_open(&k, p->port))
        return NULL;
    while (!atomic_load(&p->stop) && p->n < MAX_PROBES) {
        double t0 = now_s();
        long status = conn_request(&k, "GET", "/healthz");
        double t1 = now_s();
        if (status != 200)
            fprintf(stderr, "state: /healthz answered %ld during the DELETE\n", status);
        p->start[p->n] = t0;
        p->rtt[p->n++] = t1 - t0;
        sleep_s(1e-3);
    }
    conn_close(&k);
    return NULL;
}

/* Round trips that ended at or after t0 and began before t0 + DELETE_WINDOW_S, into out. */
static size_t window(const struct poller *p, double t0, double *out)
{
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->start[i] + p->rtt[i] >= t0 && p->start[i] < t0 + DELETE_WINDOW_S)
            out[m++] = p->rtt[i];
    return m;
}

static int time_delete(struct conn *k, int port, const char *id, struct figures *f)
{
    struct poller *p = calloc(1, sizeof *p);
    double *w = calloc(MAX_PROBES, sizeof *w);
    pthread_t th;
    if (!p || !w) {
        free(p), free(w);
        return -1;
    }
    p->port = port;
    if (pthread_create(&th, NULL, poll_healthz, p)) {
        free(p), free(w);
        return -1;
    }
    sleep_s(0.2);   /* the poller's connection is open and warm before the DELETE */
    char path[64];
    snprintf(path, sizeof path, "/jobs/%s", id);
    double t0 = now_s();
    long status = conn_request(k, "DELETE", path);
    double del = now_s() - t0;
    sleep_s(t0 + DELETE_WINDOW_S - now_s() > 0 ? t0 + DELETE_WINDOW_S - now_s() : 0);
    atomic_store(&p->stop, true);
    pthread_join(th, NULL);
    size_t m = window(p, t0, w);
    double med = sort_median(w, m);
    f->stall_max = m ? w[m - 1] : NAN;
    printf("DELETE %s: %ld in %.2f ms\n", path, status, del * 1e3);
    printf("/healthz every 1 ms, round trips begun in the %.0f s from the DELETE (however long "
           "they took): %zu, longest %.2f ms, median %.2f ms\n", DELETE_WINDOW_S, m,
           f->stall_max * 1e3, med * 1e3);
    free(p), free(w);
    return status == 200 ? 0 : -1;
}

/* Report ------------------------------------------------------------------------------------ */

static void summary_line(const char *what, double v, const char *unit, const char *goal, bool met)
{
    printf("  %-40s %12.3f %-3s  goal %-8s %s\n", what, v, unit, goal, met ? "met" : "MISSED");
}

static void print_summary(int64_t rows, const struct figures *f)
{
    printf("\nsummary (%" PRId64 " rows):\n", rows);
    summary_line("restart to /healthz (median)", f->restart_med, "s", "< 1 s", f->restart_med < 1);
    summary_line("bytes per iteration on disk", f->bytes_per_it, "B", "<= 32", f->bytes_per_it <= 32);
    summary_line("metrics?max_points=1000 (median)", f->metrics_med * 1e3, "ms", "< 50 ms",
                 f->metrics_med < 0.05);
    summary_line("longest /healthz stall during DELETE", f->stall_max * 1e3, "ms", "< 50 ms",
                 f->stall_max < 0.05);
}

static void usage(void)
{
    printf("build/bench/state [--rows N] [--restarts K] [--traind PATH]\n"
           "  --rows N       metrics rows of the one job (default 10000000)\n"
           "  --restarts K   daemon starts timed to /healthz (default 3)\n"
           "  --traind PATH  the daemon (default the build's: %s)\n", TRAIND_DEFAULT_BIN);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.rows = 10000000, .restarts = 3, .traind = TRAIND_DEFAULT_BIN};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (v && strcmp(a, "--rows") == 0) {
            o->rows = strtoll(v, NULL, 10), i++;
        } else if (v && strcmp(a, "--restarts") == 0) {
            o->restarts = atoi(v), i++;
        } else if (v && strcmp(a, "--traind") == 0) {
            o->traind = v, i++;
        } else {
            fprintf(stderr, "state: unknown or incomplete option %s (see --help)\n", a);
            return -1;
        }
    }
    if (o->rows < 1 || o->rows > SPEC_MAX_ITERATIONS || o->restarts < 1) {
        fprintf(stderr, "state: --rows takes 1 .. %" PRId64 ", --restarts at least 1\n",
                SPEC_MAX_ITERATIONS);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse_opts(argc, argv, &o))
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);   /* each figure as it comes, in order with the log */
    setenv("TRAIND_BIN", o.traind, 1);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct daemon_proc d = {0};
    snprintf(d.dir, sizeof d.dir, "/tmp/traind-bench-state-XXXXXX");
    if (!mkdtemp(d.dir)) {
        fprintf(stderr, "state: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    char state[300], id[32];
    daemon_state_dir(&d, state, sizeof state);   /* where daemon_spawn points --state-dir */
    struct figures f = {NAN, NAN, NAN, NAN};
    struct conn k = {0};
    int rc = 1;
    if (write_history(state, o.rows, id))
        goto out;
    f.bytes_per_it = bytes_per_iteration(state, o.rows);
    if (time_restarts(&d, o.restarts, &f) || conn_open(&k, d.port))
        goto out;
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/metrics?max_points=1000", id);
    f.metrics_med = time_metrics(&k, path, "no limit: the whole history");
    snprintf(path, sizeof path, "/jobs/%s/metrics?max_points=1000&limit=100000", id);
    time_metrics(&k, path, "limit=100000: the first hundred thousand rows");
    if (time_delete(&k, d.port, id, &f))
        goto out;
    print_summary(o.rows, &f);
    rc = 0;
out:
    if (k.c)
        conn_close(&k);
    if (rc && d.pid > 0)
        fprintf(stderr, "state: stopped early; the daemon's log follows\n"), daemon_print_log(&d);
    daemon_stop(&d, 120);
    daemon_cleanup(&d);
    curl_global_cleanup();
    return rc;
}
