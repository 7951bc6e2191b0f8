/* parquet_ingest.c — Parquet decode benchmark: chosen columns of whole files, from memory into rows of doubles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "parquet.h"

/*
 * usage: parquet-ingest [--repeats R] --columns GROUP=NAME,NAME... [--columns ...] FILE.parquet...
 *
 * For each file and each group of columns: the file read into memory, then the columns decoded
 * by parquet_read_rows into one warm float64 array (rows x columns, row-major, as a dataset lays
 * them out), once untimed and R times timed, on this thread. One line per timed pass:
 *   traind FILE GROUP rows N columns C cpu_s X wall_s Y
 * bench/run-parquet-ingest sets them beside DuckDB reading the same files (bench/duckdb/).
 */

struct group {
    const char *label;
    const char *names[16];
    size_t n;
};

/* "label=a,b,c" into g (the string is kept and cut in place). */
static int parse_group(char *arg, struct group *g)
{
    char *eq = strchr(arg, '=');
    if (!eq)
        return -1;
    *eq = '\0';
    g->label = arg;
    g->n = 0;
    for (char *tok = strtok(eq + 1, ","); tok; tok = strtok(NULL, ",")) {
        if (g->n == sizeof g->names / sizeof g->names[0])
            return -1;
        g->names[g->n++] = tok;
    }
    return g->n ? 0 : -1;
}

static int bench_group(const char *path, const char *data, size_t len, const struct group *g, int repeats)
{
    size_t cols[16];
    for (size_t j = 0; j < g->n; j++)
        if (!parquet_column_named(data, len, g->names[j], &cols[j])) {
            fprintf(stderr, "parquet-ingest: %s: no column %s\n", path, g->names[j]);
            return -1;
        }
    struct csv_format fmt = {.name = path, .dtype = STORE_F64};
    struct csv_layout lay;
    struct err e = {0};
    uint64_t rows;
    if (parquet_measure(&fmt, data, len, &lay, &rows, &e)) {
        fprintf(stderr, "parquet-ingest: %s\n", e.msg);
        return -1;
    }
    double *dst = calloc(rows * g->n, sizeof *dst);
    if (!dst) {
        fprintf(stderr, "parquet-ingest: out of memory\n");
        return -1;
    }
    struct parquet_select s = {path, STORE_F64, cols, g->n};
    int rc = parquet_read_rows(&s, data, len, dst, rows, &e); /* untimed: page-faults dst in */
    for (int r = 0; r < repeats && rc == ERR_OK; r++) {
        double t0 = now_s(), c0 = cpu_s();
        rc = parquet_read_rows(&s, data, len, dst, rows, &e);
        double c = cpu_s() - c0, t = now_s() - t0;
        printf("traind %s %s rows %llu columns %zu cpu_s %.6f wall_s %.6f\n", path, g->label,
               (unsigned long long)rows, g->n, c, t);
    }
    if (rc)
        fprintf(stderr, "parquet-ingest: %s\n", e.msg);
    free(dst);
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct group groups[8];
    size_t n_groups = 0;
    int repeats = 1, i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (i + 1 >= argc)
            break;
        if (strcmp(argv[i], "--repeats") == 0 && (repeats = atoi(argv[i + 1])) > 0)
            continue;
        if (strcmp(argv[i], "--columns") == 0 && n_groups < sizeof groups / sizeof groups[0] &&
            parse_group(argv[i + 1], &groups[n_groups]) == 0) {
            n_groups++;
            continue;
        }
        break;
    }
    if (i >= argc || n_groups == 0 || strncmp(argv[i], "--", 2) == 0) {
        fprintf(stderr, "usage: parquet-ingest [--repeats R] --columns GROUP=NAME,NAME... [--columns ...] "
                        "FILE.parquet...\n");
        return 2;
    }
    for (; i < argc; i++) {
        size_t len;
        char *data = slurp(argv[i], &len);
        if (!data) {
            fprintf(stderr, "parquet-ingest: cannot read %s\n", argv[i]);
            return 1;
        }
        for (size_t g = 0; g < n_groups; g++)
            if (bench_group(argv[i], data, len, &groups[g], repeats))
                return 1;
        free(data);
    }
    return 0;
}
