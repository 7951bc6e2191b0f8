/* test_history.c — the metrics history's blocks: exact round trips, and pages equal to a row-by-row reading. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "db.h"
#include "history.h"
#include "job.h"
#include "scratch_dir.h"

TestSuite(history, .init = scratch_dir_make, .fini = scratch_dir_remove);

/* A deterministic stream of awkward values: spikes, NaN and infinite losses, sparse evaluations. */
static uint64_t state = 88172645463325252ull;

static double uniform(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (double)(state >> 11) / 9007199254740992.0;
}

static struct metrics_row random_row(int64_t it, double *t)
{
    *t += uniform() < 0.01 ? 40.0 * uniform() : 1e-3 * uniform();   /* now and then a long pause */
    double u = uniform();
    struct metrics_row r = {.v = {
        [METRIC_ITERATION] = (double)it, [METRIC_TIME] = *t,
        [METRIC_LOSS] = u < 0.02 ? NAN : u < 0.03 ? INFINITY : 100.0 * uniform() / (1.0 + (double)it / 100.0),
        [METRIC_SECONDS_PER_ITERATION] = 1e-3 * uniform(), [METRIC_SAMPLES_PER_SECOND] = 1e7 * uniform(),
        [METRIC_DATA_WAIT_SECONDS] = uniform() < 0.5 ? 0.0 : 1e-4 * uniform(),
        [METRIC_GRAD_NORM] = 1e3 * uniform(), [METRIC_LR] = it < 700 ? 0.03 : 0.003,
        [METRIC_EVAL_LOSS] = uniform() < 0.01 ? uniform() : NAN,
    }};
    job_metrics_round(&r);
    return r;
}

static bool same_row(const struct metrics_row *a, const struct metrics_row *b)
{
    return memcmp(a->v, b->v, sizeof a->v) == 0;
}

Test(history, a_block_decodes_to_the_rows_it_was_encoded_from_bit_for_bit)
{
    static struct hist_block b, back;
    double t = 1.7e9;
    b.first = 1000;
    b.n = 200;
    for (int i = 0; i < b.n; i++)
        b.rows[i] = random_row(1000 + i, &t);
    b.rows[150].v[METRIC_LR] = 0.5;   /* an lr that changes within the block */
    unsigned char buf[HIST_BLOCK_MAX];
    size_t len = hist_encode(&b, buf);
    cr_assert_gt(len, 0);
    struct err e = {0};
    cr_assert_eq(hist_decode(buf, len, 1000, 200, &back, &e), 0, "%s", e.msg);
    for (int i = 0; i < b.n; i++)
        cr_assert(same_row(&b.rows[i], &back.rows[i]), "row %d differs", i);
    cr_expect_neq(hist_decode(buf, len - 1, 1000, 200, &back, &e), 0, "a short block is refused");
    buf[0] = 9;
    cr_expect_neq(hist_decode(buf, len, 1000, 200, &back, &e), 0, "an unknown version is refused");
}

Test(history, a_row_earlier_than_the_one_before_it_cannot_share_its_block)
{
    static struct hist_block b;
    double t = 1.7e9;
    b.first = 0;
    b.n = 2;
    b.rows[0] = random_row(0, &t);
    b.rows[1] = random_row(1, &t);
    b.rows[1].v[METRIC_TIME] = b.rows[0].v[METRIC_TIME] - 1.0;
    unsigned char buf[HIST_BLOCK_MAX];
    cr_expect_eq(hist_encode(&b, buf), 0);
}

/* The rows of the page [since, since + limit), thinned as the API documents it, one row at a time. */
static json_t *reference_page(const struct metrics_row *rows, int64_t n, int64_t since, int64_t limit,
                              int64_t max_points, bool evals)
{
    int64_t lo = since < n ? since : n, hi = limit >= 0 && lo + limit < n ? lo + limit : n;
    json_t *out = json_array();
    char text[HIST_ROW_TEXT_MAX + 1];
    int64_t count = hi - lo;
    if (max_points == 0 || count <= max_points) {
        for (int64_t i = lo; i < hi; i++) {
            text[hist_row_text(&rows[i], text)] = '\0';
            json_array_append_new(out, json_loads(text, 0, NULL));
        }
        return out;
    }
    int64_t per = evals && max_points >= 5 ? 5 : 4, buckets = max_points / per;
    for (int64_t k = 0; k < buckets; k++) {
        int64_t s = lo + count * k / buckets, e = lo + count * (k + 1) / buckets;
        if (s >= e)
            continue;
        int64_t pick[5] = {s, e - 1, s, s, s}, lowest = -1, highest = -1;
        for (int64_t i = s; i < e; i++) {
            double l = rows[i].v[METRIC_LOSS];
            if (lowest < 0 || isnan(rows[lowest].v[METRIC_LOSS]) || l < rows[lowest].v[METRIC_LOSS])
                lowest = i;
            if (highest < 0 || isnan(rows[highest].v[METRIC_LOSS]) || l > rows[highest].v[METRIC_LOSS])
                highest = i;
            if (!isnan(rows[i].v[METRIC_EVAL_LOSS]))
                pick[4] = i;
        }
        pick[2] = lowest;
        pick[3] = highest;
        for (int64_t a = 0; a < per; a++)   /* sorted, each row once */
            for (int64_t b = a + 1; b < per; b++)
                if (pick[b] < pick[a]) {
                    int64_t x = pick[a];
                    pick[a] = pick[b];
                    pick[b] = x;
                }
        for (int64_t q = 0; q < per; q++)
            if (q == 0 || pick[q] != pick[q - 1]) {
                text[hist_row_text(&rows[pick[q]], text)] = '\0';
                json_array_append_new(out, json_loads(text, 0, NULL));
            }
    }
    return out;
}

/* A running job of spec in a registry attached to a fresh state database. */
static struct job *running_job(const char *spec_text, struct db **d, struct job_registry **r)
{
    struct err e = {0};
    cr_assert_eq(db_open(dir, d, &e), 0, "%s", e.msg);
    *r = job_registry_new(&e);
    db_attach(*d, *r);
    json_t *sj = json_loads(spec_text, 0, NULL);
    struct job_spec *spec;
    struct spec_error se;
    cr_assert_eq(spec_parse(sj, &spec, &se), 0, "%s: %s", se.field, se.message);
    json_decref(sj);
    struct job *j = job_registry_add(*r, spec, &e);
    cr_assert_not_null(j, "%s", e.msg);
    job_mark_running(j, "cpu");
    return j;
}

Test(history, every_page_thinned_or_not_is_what_reading_row_by_row_gives)
{
    enum { N = 6000 };
    static struct metrics_row rows[N];
    struct err e = {0};
    struct db *d;
    struct job_registry *r;
    struct job *j = running_job("{\"data\":{\"train\":\"x\",\"test\":\"y\"},\"iterations\":6000}", &d, &r);
    double t = 1.7e9;
    for (int i = 0; i < N; i++) {
        rows[i] = random_row(i, &t);
        cr_assert_eq(job_append_metrics(j, &rows[i], &e), 0);
    }
    static const int64_t cases[][3] = {   /* since, limit, max_points */
        {0, -1, 0}, {0, -1, 1000}, {0, -1, 40}, {0, -1, 7}, {0, -1, 4}, {123, 4567, 100}, {5999, -1, 8},
        {2500, 10, 8}, {300, 5000, 999}, {6000, -1, 40}, {17, 289, 16}, {0, 6000, 5999},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t *k = cases[c];
        json_t *page = db_metrics_to_json(d, j, k[0], k[1], k[2]);
        cr_assert_not_null(page);
        json_t *want = reference_page(rows, N, k[0], k[1], k[2], true);
        cr_expect(json_equal(json_object_get(page, "rows"), want),
                  "since %lld, limit %lld, max_points %lld: %zu rows, the row-by-row reading has %zu",
                  (long long)k[0], (long long)k[1], (long long)k[2],
                  json_array_size(json_object_get(page, "rows")), json_array_size(want));
        json_decref(page);
        json_decref(want);
    }
    db_close(d);
    job_registry_free(r);
}

/* Steps of exactly 1 ms: a run again cuts its blocks about where the first run did. */
static struct metrics_row steady_row(int64_t it)
{
    double t = 0;
    struct metrics_row r = random_row(it, &t);
    r.v[METRIC_TIME] = 1.7e9 + (double)it * 1e-3;
    job_metrics_round(&r);
    return r;
}

Test(history, rows_run_again_after_a_requeue_replace_the_old_ones_in_every_page)
{
    enum { N = 700, FROM = 400 };
    static struct metrics_row rows[N];
    struct err e = {0};
    struct db *d;
    struct job_registry *r;
    struct job *j = running_job("{\"data\":{\"train\":\"x\"},\"iterations\":700}", &d, &r);
    for (int i = 0; i < N; i++) {
        rows[i] = steady_row(i);
        job_append_metrics(j, &rows[i], &e);
    }
    cr_assert_eq(db_flush(d, &e), 0, "%s", e.msg);
    json_decref(db_metrics_to_json(d, j, 0, -1, 0));   /* the stored blocks are rendered now, */
    json_decref(db_metrics_to_json(d, j, 0, -1, 8));   /* and their summaries kept */
    cr_assert_eq(job_requeue(j, FROM), 0);
    job_mark_running(j, "cpu");
    for (int i = FROM; i < N; i++) {   /* the same iterations again, other losses */
        rows[i] = steady_row(i);
        job_append_metrics(j, &rows[i], &e);
    }
    /* Written before any read, so nothing read in between can have refreshed what was kept. */
    cr_assert_eq(db_flush(d, &e), 0, "%s", e.msg);
    for (int64_t max_points = 0; max_points <= 8; max_points += 8) {
        json_t *page = db_metrics_to_json(d, j, 0, -1, max_points);
        json_t *want = reference_page(rows, N, 0, -1, max_points, false);
        cr_expect(json_equal(json_object_get(page, "rows"), want), "max_points %lld", (long long)max_points);
        json_decref(page);
        json_decref(want);
    }
    db_close(d);
    job_registry_free(r);
}

/* The stream's text for since and limit, read cap bytes at a time (malloc'd, *len bytes). */
static char *streamed(struct db *d, const struct job *j, int64_t since, int64_t limit, size_t cap, size_t *len)
{
    struct err e = {0};
    struct hist_stream *st = db_metrics_stream(d, j, since, limit, &e);
    cr_assert_not_null(st, "%s", e.msg);
    char *text = NULL;
    size_t n = 0, tcap = 0;
    char piece[64];
    ssize_t got;
    while ((got = hist_stream_read(st, piece, cap, &e)) > 0) {
        cr_assert_leq((size_t)got, cap);
        cr_assert_eq(buf_append(&text, &n, &tcap, piece, (size_t)got), 0);
    }
    cr_assert_eq(got, 0, "%s", e.msg);
    hist_stream_free(st);
    *len = n;
    return text;
}

Test(history, a_streamed_page_is_the_whole_pages_text_byte_for_byte)
{
    enum { N = 2000, STORED = 1500 };
    static struct metrics_row rows[N];
    struct err e = {0};
    struct db *d;
    struct job_registry *r;
    struct job *j = running_job("{\"data\":{\"train\":\"x\"},\"iterations\":2000}", &d, &r);
    double t = 1.7e9;
    for (int i = 0; i < N; i++) {
        rows[i] = random_row(i, &t);
        cr_assert_eq(job_append_metrics(j, &rows[i], &e), 0);
        if (i == STORED - 1)
            cr_assert_eq(db_flush(d, &e), 0, "%s", e.msg);   /* the rest stay buffered */
    }
    static const int64_t cases[][2] = {{0, 100000}, {7, 1000}, {1499, 300}, {1999, 5}, {2000, 10}, {0, 256}};
    static const size_t caps[] = {1, 13, 64};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t k = 0; k < sizeof caps / sizeof *caps; k++) {
            size_t want_len, got_len;
            char *want = db_metrics_text(d, j, cases[c][0], cases[c][1], 0, &want_len, &e);
            cr_assert_not_null(want, "%s", e.msg);
            char *got = streamed(d, j, cases[c][0], cases[c][1], caps[k], &got_len);
            cr_expect(got_len == want_len && memcmp(got, want, want_len) == 0,
                      "since %lld, limit %lld, %zu bytes a read: the stream differs from the page",
                      (long long)cases[c][0], (long long)cases[c][1], caps[k]);
            free(want);
            free(got);
        }
    db_close(d);
    job_registry_free(r);
}
