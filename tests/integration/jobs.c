/* jobs.c — job-level steps for the integration tests (Criterion assertions inside). */
#include "jobs.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *baseline_spec(const char *train, int iterations, int batch)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"name\":\"dc-taxi-baseline\",\"data\":{\"train\":\"%s\"},"
             "\"model\":{\"type\":\"linear\"},\"loss\":\"mse\","
             "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,"
             "\"batch_size\":%d,\"iterations\":%d,\"dtype\":\"float64\",\"seed\":0}",
             train, batch, iterations);
    return buf;
}

const char *spec_with(const char *spec, const char *member)
{
    static char buf[2048];
    size_t n = strlen(spec);
    cr_assert(n > 1 && spec[n - 1] == '}' && n + strlen(member) + 2 < sizeof buf);
    snprintf(buf, sizeof buf, "%.*s,%s}", (int)(n - 1), spec, member);
    return buf;
}

const char *spec_with_data(const char *spec, const char *member)
{
    static char buf[2400];
    const char *head = "{\"data\":{";
    cr_assert(strncmp(spec, head, strlen(head)) == 0, "the spec does not begin with data: %s", spec);
    cr_assert(strlen(spec) + strlen(member) + 2 < sizeof buf);
    snprintf(buf, sizeof buf, "%s%s,%s", head, member, spec + strlen(head));
    return buf;
}

void submit_job(const struct daemon_proc *d, const char *spec, char *id, size_t cap)
{
    struct http_reply r;
    cr_assert(http(d, "POST", "/jobs", "application/json", spec, &r));
    cr_assert_eq(r.status, 201, "POST /jobs: %ld %s", r.status, r.body);
    const char *s = json_string_value(json_object_get(r.json, "id"));
    cr_assert_not_null(s);
    snprintf(id, cap, "%s", s);
    char loc[128], want[160];
    snprintf(want, sizeof want, "/jobs/%s", id);
    cr_expect_str_eq(http_header(&r, "Location", loc, sizeof loc), want);
    http_reply_free(&r);
}

json_t *get_json(const struct daemon_proc *d, const char *path, long status)
{
    struct http_reply r;
    cr_assert(http(d, "GET", path, NULL, NULL, &r), "GET %s", path);
    cr_assert_eq(r.status, status, "GET %s: %ld %s", path, r.status, r.body);
    cr_assert_not_null(r.json, "GET %s: not JSON: %s", path, r.body);
    json_t *j = json_incref(r.json);
    http_reply_free(&r);
    return j;
}

static json_t *get_job(const struct daemon_proc *d, const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    return get_json(d, path, 200);
}

json_t *wait_job_done(const struct daemon_proc *d, const char *id, double timeout_s)
{
    for (double t0 = now_s(); now_s() - t0 < timeout_s;) {
        json_t *j = get_job(d, id);
        const char *st = json_string_value(json_object_get(j, "state"));
        cr_assert_not_null(st);
        if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 || strcmp(st, "cancelled") == 0)
            return j;
        json_decref(j);
        usleep(50 * 1000);
    }
    cr_assert_fail("job %s did not finish in %.0f s", id, timeout_s);
    return NULL;
}

char *job_failure(const struct daemon_proc *d, const char *id, const char *code, double timeout_s)
{
    json_t *job = wait_job_done(d, id, timeout_s);
    json_t *err = json_object_get(job, "error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "failed", "job %s: %s", id,
                     msg ? msg : "no error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), code, "job %s: %s", id, msg);
    char *out = strdup(msg ? msg : "");
    cr_assert_not_null(out);
    json_decref(job);
    return out;
}

void write_partition(const struct daemon_proc *d, const char *name, const char *text, char *dir,
                     size_t cap)
{
    char csv[1024];
    snprintf(dir, cap, "%s/%s", d->dir, name);
    cr_assert_eq(mkdir(dir, 0700), 0, "mkdir %s", dir);
    snprintf(csv, sizeof csv, "%s/part-00000.csv", dir);
    FILE *f = fopen(csv, "w");
    cr_assert_not_null(f, "%s", csv);
    cr_assert_eq(fputs(text, f) < 0, 0);
    cr_assert_eq(fclose(f), 0);
}

void wait_job_iterations(const struct daemon_proc *d, const char *id, long long iterations)
{
    json_int_t it = 0;
    char state[32] = "?";
    for (double t0 = now_s(); now_s() - t0 < 60;) {
        json_t *j = get_job(d, id);
        it = json_integer_value(json_object_get(json_object_get(j, "progress"), "iteration"));
        const char *st = json_string_value(json_object_get(j, "state"));
        snprintf(state, sizeof state, "%s", st ? st : "?");
        json_decref(j);
        if (it >= iterations)
            return;
        usleep(20 * 1000);
    }
    daemon_print_log(d);
    cr_assert_fail("job %s never reached iteration %lld in 60 s: %s at %lld", id, iterations, state, (long long)it);
}

void wait_job_state(const struct daemon_proc *d, const char *id, const char *state, double timeout_s)
{
    const char *last = "?";
    char seen[32] = "?";
    for (double t0 = now_s(); now_s() - t0 < timeout_s;) {
        json_t *j = get_job(d, id);
        last = json_string_value(json_object_get(j, "state"));
        snprintf(seen, sizeof seen, "%s", last ? last : "?");
        json_decref(j);
        if (strcmp(seen, state) == 0)
            return;
        usleep(20 * 1000);
    }
    cr_assert_fail("job %s is %s, not %s, after %.0f s", id, seen, state, timeout_s);
}

void job_action(const struct daemon_proc *d, const char *id, const char *action, long status)
{
    char path[160];
    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/%s", id, action);
    cr_assert(http(d, "POST", path, NULL, NULL, &r), "POST %s", path);
    cr_assert_eq(r.status, status, "POST %s: %ld %s", path, r.status, r.body);
    http_reply_free(&r);
}

const char *reply_error_code(const struct http_reply *r)
{
    return json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
}

void daemon_stop_clean(struct daemon_proc *d)
{
    if (d->pid > 0) {
        int status = daemon_stop(d, 20);
        if (status != 0)
            daemon_print_log(d);
        cr_expect_eq(status, 0, "traind exited with status %d on SIGTERM", status);
    }
    daemon_cleanup(d);
}

size_t metrics_column(json_t *metrics, const char *name)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(metrics, "columns"), i, c)
        if (json_is_string(c) && strcmp(json_string_value(c), name) == 0)
            return i;
    cr_assert_fail("metrics have no column %s", name);
    return 0;
}

void job_column(const struct daemon_proc *d, const char *id, const char *name, double *out, size_t n)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);
    json_t *m = get_json(d, path, 200);
    json_t *rows = json_object_get(m, "rows");
    size_t at = metrics_column(m, name);
    cr_assert_eq(json_array_size(rows), n, "job %s has %zu rows, not %zu", id, json_array_size(rows), n);
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(rows, i);
        cr_assert_eq(json_integer_value(json_array_get(row, 0)), (json_int_t)i, "job %s: row %zu is iteration %lld",
                     id, i, (long long)json_integer_value(json_array_get(row, 0)));
        json_t *v = json_array_get(row, at);
        out[i] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    json_decref(m);
}

void succeeded_column(const struct daemon_proc *d, const char *spec, const char *name, double *out, size_t n)
{
    char id[64];
    submit_job(d, spec, id, sizeof id);
    json_t *j = wait_job_done(d, id, 240);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    job_column(d, id, name, out, n);
}

void job_losses(const struct daemon_proc *d, const char *id, double *loss, size_t n)
{
    job_column(d, id, "loss", loss, n);
}

void expect_bucketed_as_whole(const double *bucketed, const double *whole, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_expect(memcmp(&bucketed[i], &whole[i], sizeof whole[i]) == 0,
                  "iteration %zu: loss %.17g in buckets, %.17g whole", i, bucketed[i], whole[i]);
}

void copy_eval_fixture(const struct daemon_proc *d, const char *name)
{
    const char *ref = getenv("TRAIND_EVAL_TORCH");
    cr_assert_not_null(ref);
    const char *slash = strrchr(ref, '/');
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%.*s/%s' '%s/%s'", (int)(slash ? slash - ref : 1), slash ? ref : ".", name,
             d->dir, name);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The 8-byte little-endian header length, the JSON header, then the tensors. */
json_t *safetensors_header(const char *body, size_t len, const char **data)
{
    cr_assert_geq(len, 8);
    uint64_t n;
    memcpy(&n, body, 8);
    cr_assert_leq(n, len - 8);
    json_t *h = json_loadb(body + 8, (size_t)n, 0, NULL);
    cr_assert_not_null(h, "the header is not JSON");
    *data = body + 8 + n;
    return h;
}
