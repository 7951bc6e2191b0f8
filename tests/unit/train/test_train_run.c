/*
 * test_train_run.c — the engine on its own: the DC-taxi baseline through train_run, with no
 * daemon, database or HTTP, its rows, checkpoints and end collected through the hooks and its
 * losses checked against PyTorch's (tests/fixtures/core_parity_linear.txt); then the same job
 * as 2 and 3 replicas in one process (replica.h), against PyTorch and against one replica.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "helpers.h"
#include "nn.h"
#include "replica.h"
#include "rng.h"
#include "spec.h"
#include "tmpdir.h"
#include "train.h"

static const char *LINEAR = "core_parity_linear.txt";
#define ITERATIONS 50   /* the fixture's */
#define MAX_CKPTS 8

/* What the hooks saw. */
struct seen {
    struct metrics_row rows[ITERATIONS];
    struct train_progress progress[ITERATIONS];
    int n_rows;
    char ckpt_path[MAX_CKPTS][512];
    int64_t ckpt_iterations[MAX_CKPTS];
    uint64_t ckpt_epoch[MAX_CKPTS];
    int n_ckpts;
    int n_done;
    struct err err;
    struct job_params *params;
    int stop_after;           /* > 0: ask for a cancel once this many rows came */
    atomic_int stop;
};

static void on_metrics(void *ctx, const struct metrics_row *row, const struct train_progress *p)
{
    struct seen *s = ctx;
    cr_assert_lt(s->n_rows, ITERATIONS, "more rows than iterations");
    s->progress[s->n_rows] = *p;
    s->rows[s->n_rows++] = *row;
    if (s->stop_after && s->n_rows == s->stop_after)
        atomic_store(&s->stop, TRAIN_STOP_CANCEL);
}

static void on_checkpoint(void *ctx, const char *path, int64_t iterations, uint64_t epoch)
{
    struct seen *s = ctx;
    cr_assert_lt(s->n_ckpts, MAX_CKPTS);
    snprintf(s->ckpt_path[s->n_ckpts], sizeof s->ckpt_path[0], "%s", path);
    s->ckpt_iterations[s->n_ckpts] = iterations;
    s->ckpt_epoch[s->n_ckpts++] = epoch;
}

static void on_done(void *ctx, const struct err *e, struct job_params *params)
{
    struct seen *s = ctx;
    s->n_done++;
    s->err = *e;
    s->params = params;
}

/*
 * The fixture's two batches (96 and 77 rows, label first) as one CSV in dir: with batch_size
 * 96 and no shuffling an epoch is those two batches, so the job alternates them as the
 * PyTorch script did. %.17g writes every double so that it parses back to itself.
 */
static char *write_batches_csv(const char *dir)
{
    char *path = tmp_path(dir, "dctaxi.csv");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int k = 0; k < 2; k++) {
        int64_t n;
        double *v = fixture_read(LINEAR, k ? "batch1" : "batch0", &n);
        for (int64_t i = 0; i < n; i++)
            fprintf(f, "%.17g%c", v[i], i % 9 == 8 ? '\n' : ',');
        free(v);
    }
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* j parsed as a job spec (j is released). */
static struct job_spec *spec_of_json(json_t *j)
{
    struct job_spec *s = NULL;
    struct spec_error se = {0};
    cr_assert_eq(spec_parse(j, &s, &se), 0, "%s: %s", se.field, se.message);
    json_decref(j);
    return s;
}

/* The baseline's spec: seed 0, kaiming_uniform, SGD lr 0.03, clip 0.5, float64, on the CPU; columns (JSON of
   data.label and data.features, like "[\"y\", [\"x3\", 1]]") or NULL for label 0 and the rest. */
static struct job_spec *linear_spec(const char *train, bool header, int batch_size, const char *columns)
{
    json_error_t je;
    json_t *j = json_pack_ex(&je, 0,
        "{s:{s:s, s:b}, s:{s:s}, s:s, s:{s:s, s:f}, s:f, s:i, s:i, s:s, s:s, s:i}",
        "data", "train", train, "header", header, "model", "type", "linear", "loss", "mse",
        "optimizer", "type", "sgd", "lr", 0.03, "clip_grad_norm", 0.5, "batch_size", batch_size,
        "iterations", ITERATIONS, "dtype", "float64", "device", "cpu", "seed", 0);
    cr_assert_not_null(j, "%s", je.text);
    if (columns) {
        json_t *c = json_loads(columns, 0, &je);
        cr_assert_not_null(c, "%s", je.text);
        json_object_set(json_object_get(j, "data"), "label", json_array_get(c, 0));
        json_object_set(json_object_get(j, "data"), "features", json_array_get(c, 1));
        json_decref(c);
    }
    return spec_of_json(j);
}

static struct job_spec *baseline_spec(const char *csv)
{
    return linear_spec(csv, false, 96, NULL);
}

struct fixture {
    char *dir, *csv, *ckpt_dir;
    struct job_spec *spec;
    const char *roots[1];
};

static void fixture_open(struct fixture *fx)
{
    fx->dir = tmp_make();
    fx->csv = write_batches_csv(fx->dir);
    fx->ckpt_dir = tmp_path(fx->dir, "checkpoints");
    fx->spec = baseline_spec(fx->csv);
    fx->roots[0] = fx->dir;
}

static void fixture_close(struct fixture *fx)
{
    spec_free(fx->spec);
    tmp_remove(fx->dir);   /* frees dir too */
    free(fx->ckpt_dir);
    free(fx->csv);
}

static struct train_plan plan_of(struct fixture *fx, const char *resume_from)
{
    return (struct train_plan){
        .spec = fx->spec, .job_id = "00000000000000aa",
        .data_roots = fx->roots, .n_data_roots = 1,
        .ckpt_dir = fx->ckpt_dir, .resume_from = resume_from, .init_fd = -1,
    };
}

/* train_run of plan, its hooks reporting into s; the last heartbeat. */
static int64_t run_plan(const struct train_plan *plan, struct seen *s)
{
    atomic_init(&s->stop, TRAIN_RUN);
    atomic_llong beat;
    atomic_init(&beat, 0);
    struct train_hooks hooks = {
        .ctx = s, .metrics = on_metrics, .checkpoint = on_checkpoint, .done = on_done,
        .stop = &s->stop, .heartbeat = &beat,
    };
    train_run(plan, &hooks);
    return atomic_load(&beat);
}

/* Trains fx's job through train_run, from resume_from when not NULL, into s. */
static void run(struct fixture *fx, const char *resume_from, struct seen *s)
{
    struct train_plan plan = plan_of(fx, resume_from);
    cr_expect_gt(run_plan(&plan, s), 0, "the heartbeat was never set");
    cr_assert_eq(s->n_done, 1, "done was called %d times", s->n_done);
}

static double rel(double a, double b)
{
    return fabs(a - b) / fmax(fabs(b), 1e-300);
}

/* s's n rows are iterations first.. with PyTorch's losses and norms, to 1e-10 as core's parity test. */
static void expect_torch_rows(const struct seen *s, int first, int n)
{
    double *loss = fixture_read(LINEAR, "loss", NULL), *norm = fixture_read(LINEAR, "grad_norm", NULL);
    cr_assert_eq(s->n_rows, n, "%d rows, want %d", s->n_rows, n);
    for (int i = 0; i < n; i++) {
        const double *v = s->rows[i].v;
        int it = first + i;
        cr_expect_eq(v[METRIC_ITERATION], (double)it, "row %d is iteration %g", i, v[METRIC_ITERATION]);
        cr_expect_leq(rel(v[METRIC_LOSS], loss[it]), 1e-10, "iteration %d: loss %.17g, torch %.17g", it,
                      v[METRIC_LOSS], loss[it]);
        cr_expect_leq(rel(v[METRIC_GRAD_NORM], norm[it]), 1e-10, "iteration %d: grad norm %.17g, torch %.17g",
                      it, v[METRIC_GRAD_NORM], norm[it]);
        cr_expect_eq(v[METRIC_LR], 0.03);
        cr_expect(isnan(v[METRIC_EVAL_LOSS]), "iteration %d has an eval_loss without data.test", it);
        cr_expect_eq(s->progress[i].planned, ITERATIONS);
        cr_expect_eq(s->progress[i].epoch, (uint64_t)(it + 1) / 2, "iteration %d: epoch %llu", it,
                     (unsigned long long)s->progress[i].epoch);
    }
    free(loss);
    free(norm);
}

/* The final parameters handed to done are PyTorch's w and b after the 50 iterations. */
static void expect_torch_params(const struct job_params *ps)
{
    cr_assert_not_null(ps, "a succeeded run hands its parameters over");
    cr_assert_eq(ps->n, 2);
    double *w = fixture_read(LINEAR, "w", NULL), *b = fixture_read(LINEAR, "b", NULL);
    cr_expect_str_eq(ps->p[0].name, "w");
    cr_expect_str_eq(ps->p[1].name, "b");
    cr_assert_eq(ps->p[0].rows * (ps->p[0].cols ? ps->p[0].cols : 1), 8);
    for (int i = 0; i < 8; i++)
        cr_expect_leq(rel(ps->p[0].values[i], w[i]), 1e-10, "w[%d] %.17g, torch %.17g", i,
                      ps->p[0].values[i], w[i]);
    cr_expect_leq(rel(ps->p[1].values[0], b[0]), 1e-10, "b %.17g, torch %.17g", ps->p[1].values[0], b[0]);
    free(w);
    free(b);
}

Test(train_run, the_dc_taxi_baseline_reports_a_row_per_iteration_with_pytorchs_losses)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    struct seen *s = calloc(1, sizeof *s);
    run(&fx, NULL, s);
    cr_assert_eq(s->err.code, ERR_OK, "%s", s->err.msg);
    expect_torch_rows(s, 0, ITERATIONS);
    expect_torch_params(s->params);
    job_params_free(s->params);
    free(s);
    fixture_close(&fx);
}

Test(train_run, a_finished_run_reports_its_final_checkpoint_once_and_the_file_is_there)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    struct seen *s = calloc(1, sizeof *s);
    run(&fx, NULL, s);
    cr_assert_eq(s->err.code, ERR_OK, "%s", s->err.msg);
    cr_assert_eq(s->n_ckpts, 1, "%d checkpoints (checkpoint_every is 0: the final one only)", s->n_ckpts);
    cr_expect_eq(s->ckpt_iterations[0], ITERATIONS);
    cr_expect_eq(s->ckpt_epoch[0], ITERATIONS / 2, "two batches an epoch");
    cr_expect_eq(strncmp(s->ckpt_path[0], fx.ckpt_dir, strlen(fx.ckpt_dir)), 0, "%s", s->ckpt_path[0]);
    cr_expect_eq(access(s->ckpt_path[0], R_OK), 0, "%s is not there", s->ckpt_path[0]);
    job_params_free(s->params);
    free(s);
    fixture_close(&fx);
}

Test(train_run, a_stop_request_ends_the_run_cancelled_after_a_checkpoint_and_without_parameters)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    struct seen *s = calloc(1, sizeof *s);
    s->stop_after = 5;
    run(&fx, NULL, s);
    cr_expect_eq(s->err.code, ERR_CANCELLED, "%d: %s", s->err.code, s->err.msg);
    cr_expect_str_eq(s->err.msg, "cancelled at iteration 5");
    cr_expect_null(s->params);
    expect_torch_rows(s, 0, 5);
    cr_assert_eq(s->n_ckpts, 1);
    cr_expect_eq(s->ckpt_iterations[0], 5);
    free(s);
    fixture_close(&fx);
}

Test(train_run, a_run_resumed_from_a_stop_checkpoint_goes_on_with_pytorchs_losses)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    struct seen *first = calloc(1, sizeof *first), *rest = calloc(1, sizeof *rest);
    first->stop_after = 5;
    run(&fx, NULL, first);
    cr_assert_eq(first->n_ckpts, 1);
    run(&fx, first->ckpt_path[0], rest);
    cr_assert_eq(rest->err.code, ERR_OK, "%s", rest->err.msg);
    expect_torch_rows(rest, 5, ITERATIONS - 5);
    expect_torch_params(rest->params);
    job_params_free(rest->params);
    free(first);
    free(rest);
    fixture_close(&fx);
}

/* The linear baseline on one of tests/fixtures/parquet's files (batches of 64 of its 300 rows). */
static void run_linear_on(struct fixture *fx, const char *name, const char *columns, int64_t features,
                          struct seen *s)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fx->roots[0], name);
    spec_free(fx->spec);
    fx->spec = linear_spec(path, true, 64, columns);
    run(fx, NULL, s);
    cr_assert_eq(s->err.code, ERR_OK, "%s: %s", name, s->err.msg);
    cr_assert_eq(s->n_rows, ITERATIONS);
    cr_assert_not_null(s->params);
    cr_assert_eq(s->params->p[0].rows * (s->params->p[0].cols ? s->params->p[0].cols : 1), features,
                 "%s: w is not features x 1", name);
    job_params_free(s->params);
}

/* Trains on linear.csv and on DuckDB's Parquet copy of it with the same columns: the losses agree bit for bit. */
static void expect_parquet_losses_equal_csv(const char *columns, int64_t features)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    fx.roots[0] = FIXTURES_DIR "/parquet"; /* the data root: read in place */
    struct seen *from_csv = calloc(1, sizeof *from_csv), *from_parquet = calloc(1, sizeof *from_parquet);
    run_linear_on(&fx, "linear.csv", columns, features, from_csv);
    run_linear_on(&fx, "linear.parquet", columns, features, from_parquet);
    for (int i = 0; i < ITERATIONS; i++) {
        double a = from_csv->rows[i].v[METRIC_LOSS], b = from_parquet->rows[i].v[METRIC_LOSS];
        cr_expect(memcmp(&a, &b, sizeof a) == 0, "iteration %d: loss %.17g from Parquet, %.17g from CSV", i, b, a);
        cr_expect(isfinite(a));
    }
    cr_expect_neq(from_csv->rows[0].v[METRIC_LOSS], from_csv->rows[ITERATIONS - 1].v[METRIC_LOSS],
                  "the loss never moved: the comparison says nothing");
    free(from_csv);
    free(from_parquet);
    fixture_close(&fx);
}

Test(train_run, the_baseline_from_parquet_has_the_losses_of_the_same_data_from_csv)
{
    expect_parquet_losses_equal_csv(NULL, 8);
}

Test(train_run, columns_chosen_by_name_train_alike_from_parquet_and_csv)
{
    expect_parquet_losses_equal_csv("[\"y\", [\"x5\", 2, \"x0\"]]", 3);
}

/* ---- Replicas in one process: each rank a train_run on a thread of its own. ---- */

#define MAX_REPLICAS 3

struct rank_run {
    struct train_plan plan;
    struct seen *seen;
    pthread_t thread;
};

static void *rank_main(void *arg)
{
    struct rank_run *rr = arg;
    run_plan(&rr->plan, rr->seen);
    return NULL;
}

static void run_world(struct fixture *fx, int n, struct seen **seen, int bad_rank, const char *resume_from,
                      struct replica_stats *stats);

/* fx's job as n replicas; seen[r] is what rank r's hooks saw. bad_rank >= 0 reads no data. */
static void run_replicas(struct fixture *fx, int n, struct seen **seen, int bad_rank)
{
    run_world(fx, n, seen, bad_rank, NULL, NULL);
}

/* fx's job as n replicas going on from checkpoint resume_from. */
static void run_replicas_from(struct fixture *fx, int n, struct seen **seen, const char *resume_from)
{
    run_world(fx, n, seen, -1, resume_from, NULL);
}

/* stats: NULL, or where each rank's figures go once it is done. */
static void run_world(struct fixture *fx, int n, struct seen **seen, int bad_rank, const char *resume_from,
                      struct replica_stats *stats)
{
    struct train_world *w;
    struct err e = {0};
    cr_assert_eq(train_world_new(n, &w, &e), 0, "%s", e.msg);
    struct rank_run rr[MAX_REPLICAS];
    static const char *nowhere[] = {"/nonexistent-data-root"};
    for (int r = 0; r < n; r++) {
        rr[r] = (struct rank_run){.plan = plan_of(fx, resume_from), .seen = seen[r]};
        rr[r].plan.world = w;
        rr[r].plan.rank = r;
        if (r == bad_rank)
            rr[r].plan.data_roots = nowhere;
        cr_assert_eq(pthread_create(&rr[r].thread, NULL, rank_main, &rr[r]), 0);
    }
    for (int r = 0; r < n; r++)
        cr_assert_eq(pthread_join(rr[r].thread, NULL), 0);
    for (int r = 0; r < n; r++)
        cr_assert_eq(seen[r]->n_done, 1, "rank %d: done was called %d times", r, seen[r]->n_done);
    for (int r = 0; stats && r < n; r++)
        train_world_stats(w, r, &stats[r]);
    train_world_free(w);
}

static struct seen **seen_new(int n)
{
    struct seen **s = calloc((size_t)n, sizeof *s);
    for (int r = 0; r < n; r++)
        s[r] = calloc(1, sizeof **s);
    return s;
}

static void seen_free(struct seen **s, int n)
{
    for (int r = 0; r < n; r++) {
        job_params_free(s[r]->params);
        free(s[r]);
    }
    free(s);
}

Test(train_run, the_shares_of_a_batch_are_contiguous_and_differ_by_at_most_one_row)
{
    for (size_t rows = 0; rows < 40; rows++)
        for (int n = 1; n <= 7; n++) {
            size_t next = 0, least = SIZE_MAX, most = 0;
            for (int r = 0; r < n; r++) {
                size_t lo, count;
                replica_share(rows, r, n, &lo, &count);
                cr_assert_eq(lo, next, "rows %zu, rank %d of %d starts at %zu, not %zu", rows, r, n, lo, next);
                next = lo + count;
                least = count < least ? count : least;
                most = count > most ? count : most;
            }
            cr_expect_eq(next, rows, "%d shares of %zu rows cover %zu", n, rows, next);
            cr_expect_leq(most - least, 1, "%zu rows in %d shares: %zu to %zu", rows, n, least, most);
        }
}

/*
 * 2 and 3 replicas (the 96- and 77-row batches split unevenly in 3) train the baseline with
 * PyTorch's losses, norms and parameters: rank 0 reports every row, the others none, and every
 * rank ends with the same parameters, bit for bit.
 */
Test(train_run, replicas_train_the_baseline_with_pytorchs_losses_and_equal_parameters)
{
    for (int n = 2; n <= MAX_REPLICAS; n++) {
        struct fixture fx = {0};
        fixture_open(&fx);
        struct seen **s = seen_new(n);
        run_replicas(&fx, n, s, -1);
        for (int r = 0; r < n; r++)
            cr_assert_eq(s[r]->err.code, ERR_OK, "%d replicas, rank %d: %s", n, r, s[r]->err.msg);
        expect_torch_rows(s[0], 0, ITERATIONS);
        expect_torch_params(s[0]->params);
        cr_expect_eq(s[0]->n_ckpts, 1, "rank 0 writes the final checkpoint");
        for (int r = 1; r < n; r++) {
            cr_expect_eq(s[r]->n_rows, 0, "rank %d reported rows", r);
            cr_expect_eq(s[r]->n_ckpts, 0, "rank %d wrote checkpoints", r);
            cr_assert_not_null(s[r]->params);
            for (int i = 0; i < s[0]->params->n; i++) {
                const struct job_param *a = &s[0]->params->p[i], *b = &s[r]->params->p[i];
                int64_t k = a->rows * (a->cols ? a->cols : 1);
                cr_expect_eq(memcmp(a->values, b->values, (size_t)k * sizeof(double)), 0,
                             "%d replicas: rank %d's %s differs from rank 0's", n, r, a->name);
            }
        }
        seen_free(s, n);
        fixture_close(&fx);
    }
}

/* A replica that cannot read its data fails the job, its error named, and no rank hangs. */
Test(train_run, a_failing_replica_fails_every_rank_with_its_error)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    struct seen **s = seen_new(3);
    run_replicas(&fx, 3, s, 2);
    cr_expect_neq(s[2]->err.code, ERR_OK);
    cr_expect_eq(s[0]->err.code, s[2]->err.code, "rank 0: %d %s", s[0]->err.code, s[0]->err.msg);
    cr_expect(strncmp(s[0]->err.msg, "replica 2: ", 11) == 0, "rank 0's error: %s", s[0]->err.msg);
    cr_expect_null(s[0]->params);
    seen_free(s, 3);
    fixture_close(&fx);
}

/* A stop seen by rank 0 stops every rank at one step boundary, after rank 0's checkpoint. */
Test(train_run, a_stop_on_rank_0_stops_every_replica_after_its_checkpoint)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    struct seen **s = seen_new(2);
    s[0]->stop_after = 5;
    run_replicas(&fx, 2, s, -1);
    cr_expect_eq(s[0]->err.code, ERR_CANCELLED, "%d: %s", s[0]->err.code, s[0]->err.msg);
    cr_expect_str_eq(s[0]->err.msg, "cancelled at iteration 5");
    cr_expect_eq(s[1]->err.code, ERR_CANCELLED, "%d: %s", s[1]->err.code, s[1]->err.msg);
    expect_torch_rows(s[0], 0, 5);
    cr_assert_eq(s[0]->n_ckpts, 1);
    cr_expect_eq(s[0]->ckpt_iterations[0], 5);
    seen_free(s, 2);
    fixture_close(&fx);
}

/*
 * A job checkpointed as `before` replicas goes on as `after` (a restart with other workers):
 * its rows from the checkpoint on are PyTorch's, as if one replica had never stopped.
 */
static void expect_resumed_as(int before, int after)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    struct seen **first = seen_new(before), **rest = seen_new(after > 1 ? after : 1);
    first[0]->stop_after = 7;
    run_replicas(&fx, before, first, -1);
    cr_assert_eq(first[0]->n_ckpts, 1, "%d replicas wrote %d checkpoints", before, first[0]->n_ckpts);
    const char *ckpt = first[0]->ckpt_path[0];
    if (after > 1) {
        run_replicas_from(&fx, after, rest, ckpt);
    } else {
        run(&fx, ckpt, rest[0]);
    }
    cr_assert_eq(rest[0]->err.code, ERR_OK, "%d then %d replicas: %s", before, after, rest[0]->err.msg);
    expect_torch_rows(rest[0], 7, ITERATIONS - 7);
    expect_torch_params(rest[0]->params);
    seen_free(first, before);
    seen_free(rest, after > 1 ? after : 1);
    fixture_close(&fx);
}

Test(train_run, a_job_checkpointed_as_2_replicas_goes_on_as_3_with_pytorchs_losses)
{
    expect_resumed_as(2, 3);
}

Test(train_run, a_job_checkpointed_as_3_replicas_goes_on_as_2_or_1_with_pytorchs_losses)
{
    expect_resumed_as(3, 2);
    expect_resumed_as(3, 1);
}

/* An MLP with Adam over the same rows, in dtype. */
static struct job_spec *mlp_spec(const char *csv, const char *dtype)
{
    json_error_t je;
    json_t *j = json_pack_ex(&je, 0,
        "{s:{s:s, s:b}, s:{s:s, s:[i,i], s:s}, s:s, s:{s:s, s:f}, s:i, s:i, s:s, s:s, s:i}",
        "data", "train", csv, "header", 0, "model", "type", "mlp", "hidden", 16, 16,
        "activation", "tanh", "loss", "mse", "optimizer", "type", "adam", "lr", 0.01,
        "batch_size", 96, "iterations", ITERATIONS, "dtype", dtype, "device", "cpu", "seed", 7);
    cr_assert_not_null(j, "%s", je.text);
    return spec_of_json(j);
}

/* An MLP with Adam as 2 and 3 replicas: every loss the one replica's, to rounding in dtype. */
static void expect_mlp_replicas_like_one(const char *dtype, double tol)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    spec_free(fx.spec);
    fx.spec = mlp_spec(fx.csv, dtype);
    struct seen *one = calloc(1, sizeof *one);
    run(&fx, NULL, one);
    cr_assert_eq(one->err.code, ERR_OK, "%s", one->err.msg);
    cr_assert_eq(one->n_rows, ITERATIONS);
    for (int n = 2; n <= MAX_REPLICAS; n++) {
        struct seen **s = seen_new(n);
        run_replicas(&fx, n, s, -1);
        cr_assert_eq(s[0]->err.code, ERR_OK, "%s", s[0]->err.msg);
        cr_assert_eq(s[0]->n_rows, ITERATIONS);
        for (int i = 0; i < ITERATIONS; i++) {
            double a = s[0]->rows[i].v[METRIC_LOSS], b = one->rows[i].v[METRIC_LOSS];
            cr_expect_leq(rel(a, b), tol, "%s, %d replicas, iteration %d: loss %.17g, one replica %.17g",
                          dtype, n, i, a, b);
        }
        seen_free(s, n);
    }
    job_params_free(one->params);
    free(one);
    fixture_close(&fx);
}

Test(train_run, mlp_replicas_train_as_one_replica_in_float64)
{
    expect_mlp_replicas_like_one("float64", 1e-8);
}

Test(train_run, mlp_replicas_train_as_one_replica_in_float32)
{
    expect_mlp_replicas_like_one("float32", 1e-5);
}

/*
 * The MLP's gradient (433 float64s) all-reduced in buckets of 1048 bytes (131 elements: 4
 * buckets, sent while backward runs) trains as when it is all-reduced whole after backward:
 * the same losses and parameters, bit for bit, as 2 and 3 replicas.
 */
Test(train_run, replicas_reducing_the_gradient_in_buckets_train_bit_for_bit_as_whole)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    spec_free(fx.spec);
    fx.spec = mlp_spec(fx.csv, "float64");
    for (int n = 2; n <= MAX_REPLICAS; n++) {
        struct seen **whole = seen_new(n), **bucketed = seen_new(n);
        struct replica_stats st_whole[MAX_REPLICAS], st_bucketed[MAX_REPLICAS];
        fx.spec->replica_bucket_mb = 0;
        run_world(&fx, n, whole, -1, NULL, st_whole);
        fx.spec->replica_bucket_mb = 1048.0 / (1024 * 1024);
        run_world(&fx, n, bucketed, -1, NULL, st_bucketed);
        cr_assert_eq(whole[0]->err.code, ERR_OK, "%s", whole[0]->err.msg);
        cr_assert_eq(bucketed[0]->err.code, ERR_OK, "%s", bucketed[0]->err.msg);
        cr_assert_eq(bucketed[0]->n_rows, ITERATIONS);
        for (int r = 0; r < n; r++) {
            cr_expect_eq(st_whole[r].buckets, 1, "%d replicas, rank %d, whole: %d buckets", n, r, st_whole[r].buckets);
            cr_expect_eq(st_bucketed[r].buckets, 4, "%d replicas, rank %d: %d buckets", n, r, st_bucketed[r].buckets);
        }
        for (int i = 0; i < ITERATIONS; i++) {
            double a = bucketed[0]->rows[i].v[METRIC_LOSS], b = whole[0]->rows[i].v[METRIC_LOSS];
            cr_expect(memcmp(&a, &b, sizeof a) == 0, "%d replicas, iteration %d: loss %.17g in buckets, %.17g whole",
                      n, i, a, b);
        }
        const struct job_params *pa = bucketed[0]->params, *pb = whole[0]->params;
        cr_assert(pa && pb && pa->n == pb->n);
        for (int k = 0; k < pa->n; k++)
            cr_expect(memcmp(pa->p[k].values, pb->p[k].values,
                             (size_t)(pa->p[k].rows * (pa->p[k].cols ? pa->p[k].cols : 1)) * sizeof(double)) == 0,
                      "%d replicas: %s differs", n, pa->p[k].name);
        seen_free(whole, n);
        seen_free(bucketed, n);
    }
    fixture_close(&fx);
}

/*
 * A replica that never answers: ending its part of the world from outside releases the others,
 * whether rank 0 waits after backward for the whole gradient or, with buckets of bucket_mb, on
 * its comm thread for the first bucket.
 */
static void expect_silent_replica_released(double bucket_mb)
{
    struct fixture fx = {0};
    fixture_open(&fx);
    fx.spec->replica_bucket_mb = bucket_mb;
    struct train_world *w;
    struct err e = {0};
    cr_assert_eq(train_world_new(2, &w, &e), 0, "%s", e.msg);
    struct rank_run rr = {.plan = plan_of(&fx, NULL), .seen = calloc(1, sizeof(struct seen))};
    rr.plan.world = w;
    rr.plan.rank = 0;
    cr_assert_eq(pthread_create(&rr.thread, NULL, rank_main, &rr), 0);
    usleep(200 * 1000);   /* rank 0 waits in its first all-reduce for rank 1, which never comes */
    struct err gone = {0};
    err_set(&gone, ERR_INTERNAL, "worker cpu:1 stopped responding");
    replica_leave(w, 1, &gone);
    cr_assert_eq(pthread_join(rr.thread, NULL), 0);
    cr_expect_eq(rr.seen->err.code, ERR_INTERNAL, "%d: %s", rr.seen->err.code, rr.seen->err.msg);
    cr_expect_str_eq(rr.seen->err.msg, "replica 1: worker cpu:1 stopped responding");
    cr_expect_eq(rr.seen->n_rows, 0);
    job_params_free(rr.seen->params);
    free(rr.seen);
    train_world_free(w);
    fixture_close(&fx);
}

Test(train_run, a_supervisor_ending_a_silent_replica_releases_its_peers)
{
    expect_silent_replica_released(0);
}

/* The baseline's 9 float64 gradients in buckets of 16 bytes: 5 of them. */
Test(train_run, a_supervisor_ending_a_silent_replica_releases_its_peers_waiting_for_a_bucket)
{
    expect_silent_replica_released(16.0 / (1024 * 1024));
}

#ifndef NDEBUG
struct diverged_rank {
    struct train_world *w;
    int rank;
    struct nn_model *m;
    struct err e;
    int rc;
};

static void *reduce_once(void *arg)
{
    struct diverged_rank *d = arg;
    double loss = 1;
    d->rc = replica_reduce(d->w, d->rank, d->m, 0.5, &loss, &d->e);
    return NULL;
}

/* Debug builds: replicas whose parameters differ (a bug) are caught at the first check. */
Test(train_run, replicas_whose_parameters_differ_fail_in_a_debug_build)
{
    struct train_world *w;
    struct err e = {0};
    cr_assert_eq(train_world_new(2, &w, &e), 0, "%s", e.msg);
    struct diverged_rank d[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        d[r] = (struct diverged_rank){.w = w, .rank = r};
        cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &d[r].m, &e), 0, "%s", e.msg);
        struct rng g;
        rng_seed(&g, (uint64_t)r);   /* another seed a rank: the bug */
        cr_assert_eq(nn_init_kaiming_uniform(d[r].m, &g, &e), 0, "%s", e.msg);
    }
    for (int r = 0; r < 2; r++)
        cr_assert_eq(pthread_create(&th[r], NULL, reduce_once, &d[r]), 0);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(pthread_join(th[r], NULL), 0);
        cr_expect_eq(d[r].rc, ERR_INTERNAL, "rank %d: %s", r, d[r].e.msg);
        cr_expect(strstr(d[r].e.msg, "parameters differ") != NULL, "rank %d: %s", r, d[r].e.msg);
        nn_model_free(d[r].m);
    }
    train_world_free(w);
}
#endif
