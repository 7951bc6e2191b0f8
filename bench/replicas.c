/*
 * replicas.c — how data-parallel replicas in one process scale on this machine's CPUs: the
 * DC-taxi linear step and an MLP (8-1024-1024-1, where the all-reduce of its 1.06M gradients
 * matters) trained through train_run as 1 to 4 replicas, each on a thread of its own.
 *   build/bench/replicas [--max N (4)] [--rows R (262144)] [--iterations I (20)] [--bucket-mb B (1)]
 * Prints, per model and replica count, the min and median seconds of a step (rank 0's
 * seconds_per_iteration, which includes waiting for the slowest replica), samples/s at the
 * median, the scaling efficiency against one replica (speedup / N), and the share of the
 * step rank 0 spent in the all-reduce. With fewer cores than replicas, expect no speedup:
 * the replicas then share the cores.
 * Then the MLP as 2..N replicas with its gradient (4.2 MB of float32, under the default 25
 * MiB bucket) all-reduced whole after backward (replica_bucket_mb 0) and in buckets of B MiB
 * while backward runs: min and median step, the all-reduce's share of the step (the time
 * rank 0 waited for it after backward plus the time its buckets ran during backward), and
 * how much of it backward hid. With as many replicas as cores, the comm thread competes with
 * the ranks' own threads for the cores, so expect little hidden.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replica.h"
#include "rng.h"
#include "spec.h"
#include "train.h"

#define MAX_ITERATIONS 1000
#define MAX_REPLICAS 16

struct rows_seen {
    double step_s[MAX_ITERATIONS];
    int n;
    struct err err;
};

static void on_metrics(void *ctx, const struct metrics_row *row, const struct train_progress *p)
{
    struct rows_seen *s = ctx;
    if (s->n < MAX_ITERATIONS)
        s->step_s[s->n++] = row->v[METRIC_SECONDS_PER_ITERATION];
}

static void on_done(void *ctx, const struct err *e, struct job_params *params)
{
    struct rows_seen *s = ctx;
    s->err = *e;
    job_params_free(params);
}

struct rank {
    struct train_plan plan;
    struct train_hooks hooks;
    struct rows_seen seen;
    pthread_t thread;
};

static void *rank_main(void *arg)
{
    struct rank *r = arg;
    train_run(&r->plan, &r->hooks);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rows of 8 features and a label that depends on them, as the taxi data's columns do. */
static int write_csv(const char *path, long rows)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    struct rng g;
    rng_seed(&g, 42);
    for (long i = 0; i < rows; i++) {
        double x[8], y = 3;
        for (int k = 0; k < 8; k++) {
            x[k] = rng_uniform(&g);
            y += (k + 1) * x[k];
        }
        fprintf(f, "%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", y, x[0], x[1], x[2], x[3], x[4], x[5],
                x[6], x[7]);
    }
    return fclose(f);
}

/* bucket_mb < 0: the spec's default. */
static struct job_spec *spec_of(const char *csv, bool mlp, long batch, int iterations, int replicas,
                                double bucket_mb)
{
    char text[1024], bucket[64] = "";
    if (bucket_mb >= 0)
        snprintf(bucket, sizeof bucket, ",\"replica_bucket_mb\":%g", bucket_mb);
    snprintf(text, sizeof text,
             "{\"data\":{\"train\":\"%s\"},\"model\":%s,\"loss\":\"mse\",\"optimizer\":%s,"
             "\"batch_size\":%ld,\"iterations\":%d,\"dtype\":\"%s\",\"device\":\"cpu\",\"replicas\":%d%s}",
             csv, mlp ? "{\"type\":\"mlp\",\"hidden\":[1024,1024]}" : "{\"type\":\"linear\"}",
             mlp ? "{\"type\":\"adam\",\"lr\":0.001}" : "{\"type\":\"sgd\",\"lr\":0.03}", batch, iterations,
             mlp ? "float32" : "float64", replicas, bucket);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    struct job_spec *s = NULL;
    struct spec_error se;
    if (!j || spec_parse(j, &s, &se)) {
        fprintf(stderr, "replicas: spec: %s\n", j ? se.message : je.text);
        s = NULL;
    }
    json_decref(j);
    return s;
}

/* Prints the bucket comparison's line of a run as n replicas with buckets of bucket_mb. */
static void print_buckets(int n, double bucket_mb, double min, double median, double total,
                          const struct replica_stats *st)
{
    double reduce = st->reduce_s + st->reduce_hidden_s;
    printf("%-7s %8d %9g %8d %12.6f %12.6f %10.1f%% %8.1f%%\n", "mlp", n, bucket_mb, st->buckets, min, median,
           100 * reduce / total, reduce > 0 ? 100 * st->reduce_hidden_s / reduce : 0);
}

/*
 * One model as n replicas: prints its line; *median_1 is one replica's median (set when n == 1).
 * bucket_mb >= 0: the spec's replica_bucket_mb, and the line is print_buckets'.
 */
static int bench(const char *name, const char *csv, const char *dir, bool mlp, long batch, int iterations,
                 int n, double bucket_mb, double *median_1)
{
    struct job_spec *spec = spec_of(csv, mlp, batch, iterations, n, bucket_mb);
    struct train_world *w = NULL;
    struct err e = {0};
    if (!spec || (n > 1 && train_world_new(n, &w, &e))) {
        fprintf(stderr, "replicas: %s\n", spec ? e.msg : "bad spec");
        spec_free(spec);
        return -1;
    }
    struct rank *r = calloc((size_t)n, sizeof *r);
    const char *roots[] = {dir};
    for (int k = 0; k < n; k++) {
        r[k].plan = (struct train_plan){.spec = spec, .data_roots = roots, .n_data_roots = 1, .init_fd = -1,
                                        .world = w, .rank = k};
        r[k].hooks = (struct train_hooks){.ctx = &r[k].seen, .metrics = on_metrics, .done = on_done};
        if (pthread_create(&r[k].thread, NULL, rank_main, &r[k])) {
            fprintf(stderr, "replicas: pthread_create failed\n");
            exit(1);
        }
    }
    for (int k = 0; k < n; k++)
        pthread_join(r[k].thread, NULL);
    int rc = 0;
    struct rows_seen *s = &r[0].seen;
    if (s->err.code || s->n < 3) {
        fprintf(stderr, "replicas: %s as %d: %s\n", name, n, s->err.msg);
        rc = -1;
    } else {
        double total = 0;
        for (int i = 0; i < s->n; i++)
            total += s->step_s[i];
        /* The first step warms caches and parses data: it is left out of min and median. */
        qsort(s->step_s + 1, (size_t)(s->n - 1), sizeof *s->step_s, cmp_double);
        double min = s->step_s[1], median = s->step_s[1 + (s->n - 1) / 2];
        if (n == 1)
            *median_1 = median;
        struct replica_stats st = {0};
        if (w)
            train_world_stats(w, 0, &st);
        double reduce = st.reduce_s;
        if (bucket_mb >= 0)
            print_buckets(n, bucket_mb, min, median, total, &st);
        else
            printf("%-7s %8d %12.6f %12.6f %14.0f %10.2f %10.1f%%\n", name, n, min, median, (double)batch / median,
               *median_1 / median / n, 100 * reduce / total);
    }
    free(r);
    train_world_free(w);
    spec_free(spec);
    return rc;
}

int main(int argc, char **argv)
{
    int max = 4, iterations = 20;
    long rows = 262144;
    double bucket_mb = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--max"))
            max = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rows"))
            rows = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iterations"))
            iterations = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bucket-mb"))
            bucket_mb = atof(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--max N] [--rows R] [--iterations I] [--bucket-mb B]\n", argv[0]);
            return 2;
        }
    }
    if (max < 1 || max > MAX_REPLICAS || rows < 64 || iterations < 3 || iterations > MAX_ITERATIONS ||
        !(bucket_mb > 0)) {
        fprintf(stderr, "replicas: --max 1..%d, --rows >= 64, --iterations 3..%d, --bucket-mb > 0\n", MAX_REPLICAS,
                MAX_ITERATIONS);
        return 2;
    }
    char dir[] = "/tmp/traind-bench-replicas-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char csv[128];
    snprintf(csv, sizeof csv, "%s/rows.csv", dir);
    if (write_csv(csv, rows)) {
        perror(csv);
        return 1;
    }
    printf("# %ld rows, %d iterations, %ld CPUs online\n", rows, iterations, sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-7s %8s %12s %12s %14s %10s %11s\n", "model", "replicas", "min_s", "median_s", "samples/s",
           "efficiency", "allreduce");
    int rc = 0;
    double median_1 = 0;
    for (int n = 1; n <= max && !rc; n++)
        rc = bench("linear", csv, dir, false, rows / 4, iterations, n, -1, &median_1);
    for (int n = 1; n <= max && !rc; n++)
        rc = bench("mlp", csv, dir, true, 4096, iterations, n, -1, &median_1);
    if (max >= 2 && !rc)
        printf("\n%-7s %8s %9s %8s %12s %12s %11s %9s\n", "model", "replicas", "bucket_mb", "buckets", "min_s",
               "median_s", "allreduce", "hidden");
    for (int n = 2; n <= max && !rc; n++) {
        rc = bench("mlp", csv, dir, true, 4096, iterations, n, 0, &median_1);
        rc = rc || bench("mlp", csv, dir, true, 4096, iterations, n, bucket_mb, &median_1);
    }
    unlink(csv);
    rmdir(dir);
    return rc ? 1 : 0;
}
