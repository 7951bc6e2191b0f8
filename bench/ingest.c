/* ingest.c — CSV ingest benchmark: parse MB/s per core, and rows/s a consumer gets through the prefetcher. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "csv.h"
#include "dataset.h"
#include "prefetch.h"

/*
 * Prints one line per measurement, "key: value ..." with best (fastest repeat) and
 * median figures; bench/run-ingest sets them beside pandas.read_csv on the same files.
 *   parse: the whole of each file (probe, count, parse) from memory into a warm
 *          array, on one thread: MB of CSV per second, of wall time and of the
 *          thread's CPU time (per core even when other work shares the machine).
 *   cold:  dataset_open to the last batch of the first epoch through the
 *          prefetcher (files from the page cache, parsed in parallel as they come).
 *   warm:  later epochs, served from resident rows (with --not-resident, "reparsed":
 *          later epochs parse every partition again, into reused memory).
 */

struct file {
    char *path;
    char *data;
    size_t len;
    void *dst;
};

static int load(const char *path, struct file *f)
{
    f->data = slurp(path, &f->len);
    f->path = strdup(path);
    return f->data && f->path ? 0 : -1;
}

/* One pass over every file: probe, count, parse into f->dst (allocated on the first pass). */
static int parse_all(struct file *files, size_t n, enum store_dtype dt, uint64_t *rows_out)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        struct csv_format fmt = {.name = files[i].path, .header = DATASET_HEADER_AUTO, .dtype = dt};
        struct csv_layout lay;
        struct err e = {0};
        uint64_t rows;
        if (csv_probe(&fmt, files[i].data, files[i].len, &lay, &e) ||
            csv_count_rows(&fmt, &lay, files[i].data, files[i].len, &rows, &e)) {
            fprintf(stderr, "ingest: %s\n", e.msg);
            return -1;
        }
        if (!files[i].dst && !(files[i].dst = calloc(rows * lay.ncols, sizeof(double)))) {
            fprintf(stderr, "ingest: out of memory\n");
            return -1;
        }
        if (csv_parse_rows(&fmt, &lay, files[i].data, files[i].len, files[i].dst, rows, &e)) {
            fprintf(stderr, "ingest: %s\n", e.msg);
            return -1;
        }
        total += rows;
    }
    *rows_out = total;
    return 0;
}

static int bench_parse(struct file *files, size_t n, size_t bytes, int repeats)
{
    double *t = calloc((size_t)repeats, sizeof *t), *c = calloc((size_t)repeats, sizeof *c);
    if (!t || !c)
        return -1;
    for (int dt = 0; dt < 2; dt++) {
        enum store_dtype dtype = dt ? STORE_F32 : STORE_F64;
        uint64_t rows = 0;
        if (parse_all(files, n, dtype, &rows)) /* warm-up: page-faults the arrays in */
            return -1;
        for (int r = 0; r < repeats; r++) {
            double t0 = now_s(), c0 = cpu_s();
            if (parse_all(files, n, dtype, &rows))
                return -1;
            t[r] = now_s() - t0;
            c[r] = cpu_s() - c0;
        }
        double best, median, cbest, cmedian;
        summarise(t, repeats, &best, &median);
        summarise(c, repeats, &cbest, &cmedian);
        printf("parse %s: files %zu bytes %zu rows %llu repeats %d best_MBps %.1f median_MBps %.1f "
               "cpu_best_MBps %.1f cpu_median_MBps %.1f best_Mrows_s %.2f\n", dt ? "float32" : "float64", n, bytes,
               (unsigned long long)rows, repeats, bytes / 1e6 / best, bytes / 1e6 / median, bytes / 1e6 / cbest,
               bytes / 1e6 / cmedian, rows / 1e6 / best);
    }
    free(t);
    free(c);
    return 0;
}

/*
 * Reads `epochs` epochs through a prefetcher; per-epoch seconds in t (epoch 0 counted from dataset_open),
 * and the CPU seconds of all threads during epoch 0 in *cold_cpu.
 */
static int run_prefetch(const char *url, const char *shards, enum store_dtype dt, size_t batch, size_t slots,
                        int threads, size_t resident_limit, int epochs, double *t, uint64_t *rows_per_epoch, double *wait_s,
                        double *cold_cpu, double *checksum)
{
    struct dataset_config c = {.url = url, .shards_url = shards, .header = DATASET_HEADER_AUTO, .dtype = dt,
                               .batch_size = batch, .parse_threads = threads, .resident_limit = resident_limit};
    struct dataset *ds;
    struct prefetch *pf;
    struct err e = {0};
    double t0 = now_s(), c0 = process_cpu_s();
    if (dataset_open(&c, &ds, &e)) {
        fprintf(stderr, "ingest: %s\n", e.msg);
        return -1;
    }
    struct prefetch_config pc = {.slots = slots};
    if (prefetch_start(ds, &pc, &pf, &e)) {
        fprintf(stderr, "ingest: %s\n", e.msg);
        dataset_close(ds);
        return -1;
    }
    int rc = 0;
    double sum = 0;
    uint64_t rows = 0;
    for (int ep = 0; ep < epochs && rc == 0;) {
        struct prefetch_slot s;
        if (prefetch_next(pf, -1, &s, &e) || !s.data) {
            fprintf(stderr, "ingest: %s\n", e.msg);
            rc = -1;
            break;
        }
        sum += dt == STORE_F64 ? ((double *)s.data)[0] : ((float *)s.data)[0]; /* the consumer touches it */
        rows += s.rows;
        bool last = s.next.epoch != s.cursor.epoch;
        prefetch_release(pf, &s);
        if (last) {
            double t1 = now_s();
            if (ep == 0)
                *cold_cpu = process_cpu_s() - c0;
            t[ep] = t1 - t0;
            t0 = t1;
            rows_per_epoch[ep] = rows;
            rows = 0;
            ep++;
        }
    }
    struct prefetch_stats st;
    prefetch_stats(pf, &st);
    *wait_s = st.wait_seconds;
    *checksum = sum;
    prefetch_stop(pf);
    dataset_close(ds);
    return rc;
}

static int bench_prefetch(const char *url, const char *shards, size_t bytes, size_t batch, size_t slots,
                          int threads, size_t resident_limit, int repeats)
{
    int warm_epochs = 3;
    double *cold = calloc((size_t)repeats, sizeof *cold), *warm = calloc((size_t)(repeats * warm_epochs), sizeof *warm);
    double *cpu = calloc((size_t)repeats, sizeof *cpu);
    double t[8], wait_total = 0, checksum = 0;
    uint64_t rows[8];
    if (!cold || !warm || !cpu)
        return -1;
    for (int dt = 0; dt < 2; dt++) {
        enum store_dtype dtype = dt ? STORE_F32 : STORE_F64;
        for (int r = 0; r < repeats; r++) {
            double w;
            if (run_prefetch(url, shards, dtype, batch, slots, threads, resident_limit, 1 + warm_epochs, t, rows, &w, &cpu[r],
                             &checksum))
                return -1;
            cold[r] = t[0];
            for (int k = 0; k < warm_epochs; k++)
                warm[r * warm_epochs + k] = t[1 + k];
            wait_total += w;
        }
        double best, median, wbest, wmedian, cbest, cmedian;
        summarise(cold, repeats, &best, &median);
        summarise(cpu, repeats, &cbest, &cmedian);
        summarise(warm, repeats * warm_epochs, &wbest, &wmedian);
        const char *name = dt ? "float32" : "float64";
        printf("prefetch cold %s: threads %s batch %zu slots %zu rows %llu best_Mrows_s %.2f median_Mrows_s %.2f "
               "best_MBps %.1f median_MBps %.1f cpu_median_s %.3f wall_median_s %.3f\n", name,
               threads < 0 ? "1" : threads == 0 ? "auto" : "n", batch, slots, (unsigned long long)rows[0],
               rows[0] / 1e6 / best, rows[0] / 1e6 / median, bytes / 1e6 / best, bytes / 1e6 / median, cmedian, median);
        printf("prefetch %s %s: batch %zu slots %zu rows %llu best_Mrows_s %.2f median_Mrows_s %.2f "
               "consumer_wait_s_per_run %.3f checksum %.17g\n", resident_limit == 1 ? "reparsed" : "warm", name, batch, slots, (unsigned long long)rows[1],
               rows[1] / 1e6 / wbest, rows[1] / 1e6 / wmedian, wait_total / repeats, checksum);
        wait_total = 0;
    }
    free(cold);
    free(warm);
    free(cpu);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ingest [--repeats R] [--batch N] [--slots S] [--single-thread] [--not-resident]\n"
               "              [--parse-only | --prefetch-only] DIR\n"
               "  DIR holds part-*.csv (and .meta/shards/*.csv), e.g. from build/tools/gen-dctaxi.\n"
               "  Prints parse MB/s per core and rows/s through the prefetcher (cold and warm epochs).\n");
}

int main(int argc, char **argv)
{
    int repeats = 5, threads = 0, do_parse = 1, do_prefetch = 1;
    size_t resident_limit = 0;
    size_t batch = 1 << 16, slots = 4;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--slots") && i + 1 < argc)
            slots = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--single-thread"))
            threads = -1;
        else if (!strcmp(argv[i], "--not-resident"))
            resident_limit = 1; /* one byte: no partition is kept, later epochs parse again */
        else if (!strcmp(argv[i], "--parse-only"))
            do_prefetch = 0;
        else if (!strcmp(argv[i], "--prefetch-only"))
            do_parse = 0;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!dir || repeats < 1 || batch < 1) {
        usage(stderr);
        return 2;
    }
    char url[4096], shards[4096];
    snprintf(url, sizeof url, "%s/part-*.csv", dir);
    snprintf(shards, sizeof shards, "%s/.meta/shards/*.csv", dir);
    glob_t g;
    if (glob(url, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        fprintf(stderr, "ingest: nothing matches %s\n", url);
        return 1;
    }
    struct file *files = calloc(g.gl_pathc, sizeof *files);
    size_t bytes = 0;
    for (size_t i = 0; files && i < g.gl_pathc; i++) {
        if (load(g.gl_pathv[i], &files[i])) {
            fprintf(stderr, "ingest: cannot read %s\n", g.gl_pathv[i]);
            return 1;
        }
        bytes += files[i].len;
    }
    if (!files || (do_parse && bench_parse(files, g.gl_pathc, bytes, repeats)))
        return 1;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        free(files[i].path);
        free(files[i].data);
        free(files[i].dst);
    }
    free(files);
    globfree(&g);
    if (do_prefetch && bench_prefetch(url, shards, bytes, batch, slots, threads, resident_limit, repeats))
        return 1;
    return 0;
}
