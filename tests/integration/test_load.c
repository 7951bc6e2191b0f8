/* test_load.c — the API under a bounded loopback load (200 concurrent pollers) while a CPU job trains. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"

/*
 * The daemon lets one address hold at most 64 connections (API_PER_IP_LIMIT in api/server.c)
 * and 256 in all. 200 pollers are therefore 5 clients of 40 connections each, bound to
 * 127.0.0.2..127.0.0.6: still loopback, each client well under its limit, all under the total.
 */
#define LOAD_POLLERS 200
#define LOAD_SOURCES 5
#define LOAD_WINDOW_S 10.0            /* the load stops by itself after this (TRAIND_LOAD_SECONDS)... */
#define LOAD_MAX_REQUESTS 400000L     /* ...or after this many requests, whichever comes first */
#define LOAD_REQUEST_TIMEOUT_S 20L    /* a request not answered by then is a failure */
#define LOAD_JOB_EVERY 16             /* every 16th request of a poller is GET /jobs/{id} */
/* A dashboard's first request: the whole history as an overview of this many points. */
#define LOAD_OVERVIEW_POINTS 200
#define LOAD_MAX_ERRORS 8             /* failures kept, with details, for the report */
/*
 * A dashboard polls on a period; 200 of them each asking every 100 ms is the bounded load of the
 * issue (2,000 requests/s). TRAIND_LOAD_INTERVAL_MS=0 makes every poller ask again the moment it
 * is answered instead: an unbounded stress that bench/load-steps also runs.
 */
#define LOAD_INTERVAL_MS 100
#define UNLOADED_S 3.0                /* the job's unloaded phases, before and after: at least this */

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

/* Ends with a clean shutdown, so leaks and sanitizer reports in traind fail the test. */
static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(load, .init = setup, .fini = teardown, .timeout = 600);

struct poller {
    CURL *easy;
    char url[256];
    char *body;
    size_t len, cap;
    long long since;                  /* next_since of its last metrics reply */
    long requests;
    bool on_job;                      /* the request in flight is GET /jobs/{id} */
    double due;                       /* when its next request starts; 0 while one is in flight */
    double started_at;                /* when the latest one started */
};

struct load {
    CURLM *multi;
    struct poller p[LOAD_POLLERS];
    const char *job_id;
    int port;
    long requests, ok, by_status[6];  /* by_status[status / 100] */
    long curl_errors, bad_bodies;
    double latency_sum, latency_max;  /* seconds from request to answer */
    long slow, connects;              /* answers after more than 100 ms; connections opened */
    char errors[LOAD_MAX_ERRORS][512];
    int n_errors;
    double seconds;
    double interval_s;                /* each poller's period; 0: again as soon as answered */
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct poller *p = ud;
    size_t n = size * nmemb;
    if (p->len + n + 1 > p->cap) {
        size_t cap = (p->len + n + 1) * 2;
        char *b = realloc(p->body, cap);
        if (!b)
            return 0;                 /* curl reports a write error: a failure, counted */
        p->body = b;
        p->cap = cap;
    }
    memcpy(p->body + p->len, ptr, n);
    p->len += n;
    p->body[p->len] = '\0';
    return n;
}

/* Keeps the first failures: the URL, what went wrong, and the start of the body or curl's words. */
static void load_error(struct load *l, const char *url, const char *what, const char *detail)
{
    if (l->n_errors < LOAD_MAX_ERRORS)
        snprintf(l->errors[l->n_errors++], sizeof l->errors[0], "%.200s: %.40s%.200s", url, what, detail);
}

/* Points the poller at its next request: mostly the metrics since what it has, sometimes the job. */
static void poller_next(struct load *l, struct poller *p)
{
    p->on_job = p->requests % LOAD_JOB_EVERY == LOAD_JOB_EVERY - 1;
    if (p->on_job)
        snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d/jobs/%s", l->port, l->job_id);
    else if (p->requests == 0)   /* a dashboard's overview first: the whole history, downsampled */
        snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d/jobs/%s/metrics?since=0&max_points=%d", l->port,
                 l->job_id, LOAD_OVERVIEW_POINTS);
    else                         /* then it tails the rows it has not seen */
        snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d/jobs/%s/metrics?since=%lld", l->port,
                 l->job_id, p->since);
    p->len = 0;
    if (p->body)
        p->body[0] = '\0';
    curl_easy_setopt(p->easy, CURLOPT_URL, p->url);
}

/* Whether a 200's body is what the route promises; a metrics reply also advances since. */
static bool reply_valid(struct load *l, struct poller *p)
{
    json_error_t je;
    json_t *j = json_loads(p->body ? p->body : "", 0, &je);
    bool valid = false;
    if (!j) {
        load_error(l, p->url, "body is not JSON: ", p->body ? p->body : "");
        return false;
    }
    if (p->on_job) {
        valid = json_is_string(json_object_get(j, "state")) &&
                strcmp(json_string_value(json_object_get(j, "id")) ?: "", l->job_id) == 0;
    } else {
        json_t *next = json_object_get(j, "next_since");
        valid = json_is_array(json_object_get(j, "columns")) && json_is_array(json_object_get(j, "rows")) &&
                json_is_integer(next) && json_integer_value(next) >= p->since;
        if (valid)
            p->since = json_integer_value(next);
    }
    if (!valid)
        load_error(l, p->url, "unexpected body: ", p->body);
    json_decref(j);
    return valid;
}

/* Sets up the 200 pollers; keep-alive is curl's default, and the connections are kept per source. */
static void load_init(struct load *l, int port, const char *job_id, double interval_s)
{
    memset(l, 0, sizeof *l);
    l->port = port;
    l->job_id = job_id;
    l->interval_s = interval_s;
    l->multi = curl_multi_init();
    cr_assert_not_null(l->multi);
    cr_assert_eq(curl_multi_setopt(l->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)LOAD_POLLERS), CURLM_OK);
    cr_assert_eq(curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS, (long)LOAD_POLLERS), CURLM_OK);
    for (int i = 0; i < LOAD_POLLERS; i++) {
        struct poller *p = &l->p[i];
        char source[32];
        snprintf(source, sizeof source, "host!127.0.0.%d", 2 + i % LOAD_SOURCES);
        p->easy = curl_easy_init();
        cr_assert_not_null(p->easy);
        cr_assert_eq(curl_easy_setopt(p->easy, CURLOPT_INTERFACE, source), CURLE_OK);
        curl_easy_setopt(p->easy, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(p->easy, CURLOPT_WRITEDATA, p);
        curl_easy_setopt(p->easy, CURLOPT_PRIVATE, p);
        curl_easy_setopt(p->easy, CURLOPT_TIMEOUT, LOAD_REQUEST_TIMEOUT_S);
        curl_easy_setopt(p->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(p->easy, CURLOPT_TCP_NODELAY, 1L);
    }
}

/* Books one finished request: its status, latency, and whether its body is valid. */
static void load_finish(struct load *l, struct poller *p, CURLcode rc)
{
    l->requests++;
    p->requests++;
    if (rc != CURLE_OK) {
        l->curl_errors++;
        load_error(l, p->url, "curl: ", curl_easy_strerror(rc));
        return;
    }
    long status = 0;
    double latency = 0;
    curl_easy_getinfo(p->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(p->easy, CURLINFO_TOTAL_TIME, &latency);
    l->latency_sum += latency;
    l->latency_max = fmax(l->latency_max, latency);
    long connects = 0;
    curl_easy_getinfo(p->easy, CURLINFO_NUM_CONNECTS, &connects);
    l->connects += connects;
    l->slow += latency > 0.1;
    l->by_status[status >= 100 && status < 600 ? status / 100 : 0]++;
    if (status != 200) {
        char s[16];
        snprintf(s, sizeof s, "%ld", status);
        load_error(l, p->url, "status ", s);
        return;
    }
    if (reply_valid(l, p))
        l->ok++;
    else
        l->bad_bodies++;
}

/* Starts poller p's next request. */
static void poller_start(struct load *l, struct poller *p)
{
    poller_next(l, p);
    p->due = 0;
    p->started_at = now_s();
    cr_assert_eq(curl_multi_add_handle(l->multi, p->easy), CURLM_OK);
}

/*
 * Every poller asks once per interval_s (spread over the first period so they do not ask in
 * step), or again as soon as it is answered when interval_s is 0, until window_s or
 * LOAD_MAX_REQUESTS; requests in flight at the end are waited for, up to their timeout.
 */
static void load_run(struct load *l, double window_s)
{
    double t0 = now_s();
    for (int i = 0; i < LOAD_POLLERS; i++)
        l->p[i].due = t0 + l->interval_s * i / LOAD_POLLERS;
    int running = 0, waiting = LOAD_POLLERS;
    long started = 0;
    while (running > 0 || waiting > 0) {
        double now = now_s();
        bool more = now - t0 < window_s && started < LOAD_MAX_REQUESTS;
        double next_due = now + 0.1;
        for (int i = 0; i < LOAD_POLLERS && waiting > 0; i++) {
            struct poller *p = &l->p[i];
            if (p->due <= 0)
                continue;
            if (!more) {
                p->due = 0;
                waiting--;
            } else if (p->due <= now) {
                poller_start(l, p);
                started++;
                running++;
                waiting--;
            } else if (p->due < next_due) {
                next_due = p->due;
            }
        }
        cr_assert_eq(curl_multi_perform(l->multi, &running), CURLM_OK);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(l->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            struct poller *p;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&p);
            CURLcode rc = m->data.result;
            curl_multi_remove_handle(l->multi, p->easy);
            load_finish(l, p, rc);
            if (now_s() - t0 < window_s && started < LOAD_MAX_REQUESTS) {
                /* The period runs from the previous start, as a dashboard's timer does. */
                p->due = fmax(now_s(), p->started_at + l->interval_s);
                waiting++;
            }
        }
        int ms = (int)fmax(0, fmin(100, (next_due - now_s()) * 1000));
        if (running > 0 && ms > 0)
            cr_assert_eq(curl_multi_poll(l->multi, NULL, 0, ms, NULL), CURLM_OK);
        else if (running == 0 && waiting > 0 && ms > 0)
            usleep((useconds_t)ms * 1000);
    }
    l->seconds = now_s() - t0;
}

static void load_free(struct load *l)
{
    for (int i = 0; i < LOAD_POLLERS; i++) {
        curl_easy_cleanup(l->p[i].easy);
        free(l->p[i].body);
    }
    curl_multi_cleanup(l->multi);
}

static long long job_iteration(const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *j = get_json(&D, path, 200);
    long long it = json_integer_value(json_object_get(json_object_get(j, "progress"), "iteration"));
    json_decref(j);
    return it;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median seconds_per_iteration of the rows with iteration in [from, to); NAN when none. */
static double median_step_s(json_t *rows, size_t col, long long from, long long to)
{
    size_t n = 0, cap = json_array_size(rows);
    double *v = malloc((cap ? cap : 1) * sizeof *v);
    cr_assert_not_null(v);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        long long it = json_integer_value(json_array_get(row, 0));
        if (it >= from && it < to)
            v[n++] = json_number_value(json_array_get(row, col));
    }
    qsort(v, n, sizeof *v, cmp_double);
    double m = n == 0 ? NAN : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    free(v);
    return m;
}

/* A number from the environment (bench/load-steps sets them), or def; lo..hi. */
static double env_num(const char *name, double def, double lo, double hi)
{
    const char *v = getenv(name);
    char *end;
    double x = v && *v ? strtod(v, &end) : def;
    if (v && *v)
        cr_assert(*end == '\0' && x >= lo && x <= hi, "%s=%s: want a number from %g to %g", name, v, lo, hi);
    return x;
}

static void sleep_s(double s)
{
    usleep((useconds_t)(s * 1e6));
}

/* Every iteration's row, in order, with finite numbers and a clock that never goes back. */
static void expect_every_row(json_t *m, long long reached, long long done)
{
    json_t *rows = json_object_get(m, "rows");
    size_t c_time = metrics_column(m, "time"), c_eval = metrics_column(m, "eval_loss");
    cr_expect_geq((long long)json_array_size(rows), reached, "%zu rows, but iteration %lld was reached",
                  json_array_size(rows), reached);
    cr_expect_eq((long long)json_array_size(rows), done, "%zu rows for %lld iterations",
                 json_array_size(rows), done);
    double last_time = -INFINITY;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        cr_assert_eq(json_integer_value(json_array_get(row, 0)), (json_int_t)i, "row %zu is iteration %lld",
                     i, (long long)json_integer_value(json_array_get(row, 0)));
        for (size_t c = 1; c < json_array_size(row); c++)
            cr_assert(c == c_eval ? json_is_null(json_array_get(row, c))   /* no data.test */
                                       : json_is_number(json_array_get(row, c)) &&
                                             isfinite(json_number_value(json_array_get(row, c))),
                      "row %zu column %zu is not a finite number", i, c);
        double t = json_number_value(json_array_get(row, c_time));
        cr_assert_geq(t, last_time, "time goes back at iteration %zu", i);
        last_time = t;
    }
}

/*
 * One job, three phases: unloaded, under 200 pollers, unloaded again; then it is cancelled.
 * Every request must be answered 200 with the JSON its route promises. The step times of the
 * phases are printed, never asserted (shared, noisy machines); bench/load-steps runs it longer.
 */
Test(load, two_hundred_pollers_are_all_answered_while_a_cpu_job_trains)
{
    /* The DC-taxi baseline's own batch, 2^20 rows: a step of milliseconds, as in PyTorch. */
    cr_assert(gen_dctaxi(&D, "dev", 1 << 20, 4));
    char train[512], id[64], path[160];
    snprintf(train, sizeof train, "file://%s/dev/part*.csv", D.dir);
    submit_job(&D, baseline_spec(train, 100000000, 1 << 20), id, sizeof id);
    wait_job_iterations(&D, id, 2);   /* past the first read of the data */

    double window = env_num("TRAIND_LOAD_SECONDS", LOAD_WINDOW_S, 1, 180);
    double unloaded = fmax(UNLOADED_S, window / 3);
    long long a0 = job_iteration(id);
    sleep_s(unloaded);
    long long b0 = job_iteration(id);
    struct load l;
    load_init(&l, D.port, id, env_num("TRAIND_LOAD_INTERVAL_MS", LOAD_INTERVAL_MS, 0, 10000) / 1000);
    load_run(&l, window);
    long long b1 = job_iteration(id);
    sleep_s(unloaded);
    long long c1 = job_iteration(id);

    /* Still serving afterwards, on fresh connections. */
    json_t *health = get_json(&D, "/healthz", 200);
    cr_expect_str_eq(json_string_value(json_object_get(health, "status")), "ok");
    json_decref(health);

    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/cancel", id);
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    cr_expect(r.status == 200 || r.status == 202, "POST %s: %ld %s", path, r.status, r.body);
    http_reply_free(&r);
    json_t *job = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(job, "state")), "cancelled");
    long long done = json_integer_value(json_object_get(json_object_get(job, "progress"), "iteration"));
    json_decref(job);

    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);   /* not the default page */
    json_t *m = get_json(&D, path, 200);
    json_t *rows = json_object_get(m, "rows");
    size_t c_step = metrics_column(m, "seconds_per_iteration");
    expect_every_row(m, c1, done);

    char pace[48] = "again as soon as answered";
    if (l.interval_s > 0)
        snprintf(pace, sizeof pace, "every %.0f ms", 1000 * l.interval_s);
    double before = median_step_s(rows, c_step, a0, b0);
    double during = median_step_s(rows, c_step, b0, b1);
    double after = median_step_s(rows, c_step, b1, c1);
    fprintf(stderr,
            "# load: %ld requests in %.2f s (%.0f req/s) from %d pollers on %d loopback sources, "
            "each asking %s: "
            "%ld answered 200 with valid JSON, 2xx %ld, 4xx %ld, 5xx %ld, curl errors %ld, bad bodies %ld; "
            "latency mean %.1f ms, max %.0f ms, %ld over 100 ms; %ld connections opened\n"
            "# load: median seconds_per_iteration: unloaded before %.3g s (%lld iterations), "
            "under load %.3g s (%lld), unloaded after %.3g s (%lld); under load / before = %.3f\n",
            l.requests, l.seconds, (double)l.requests / l.seconds, LOAD_POLLERS, LOAD_SOURCES,
            pace, l.ok,
            l.by_status[2], l.by_status[4], l.by_status[5], l.curl_errors, l.bad_bodies,
            l.requests > l.curl_errors ? 1000 * l.latency_sum / (double)(l.requests - l.curl_errors) : 0,
            1000 * l.latency_max, l.slow, l.connects, before, b0 - a0,
            during, b1 - b0, after, c1 - b1, during / before);
    /* For bench/load-steps: req/s, median step before, under load, after, and the ratio. */
    fprintf(stderr, "# load-steps: %.0f %.6g %.6g %.6g %.4f\n", (double)l.requests / l.seconds, before, during,
            after, during / before);
    for (int k = 0; k < l.n_errors; k++)
        fprintf(stderr, "# load: failure: %s\n", l.errors[k]);
    json_decref(m);

    cr_expect_gt(l.requests, LOAD_POLLERS, "the pollers made only %ld requests", l.requests);
    cr_expect_eq(l.ok, l.requests, "%ld of %ld requests failed (first: %s)", l.requests - l.ok, l.requests,
                 l.n_errors ? l.errors[0] : "?");
    cr_expect_gt(b1, b0, "the job made no progress under load");
    load_free(&l);
}
