/* bench.h — what bench/ingest.c and bench/parquet_ingest.c share: clocks, best and median, a file read whole. */
#ifndef TRAIND_BENCH_H
#define TRAIND_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of this thread: on a shared machine, what one core spent, whoever else was running. */
static inline double cpu_s(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static inline double process_cpu_s(void)
{
    return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts t[0..n) and gives the best (smallest) and the median. */
static inline void summarise(double *t, int n, double *best, double *median)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *best = t[0];
    *median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The whole file at path in a malloc'd buffer (one byte spare); NULL when it cannot be read. */
static inline char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    char *data = NULL;
    long n = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    if (n >= 0 && fseek(fp, 0, SEEK_SET) == 0 && (data = malloc((size_t)n + 1)) != NULL &&
        fread(data, 1, (size_t)n, fp) != (size_t)n) {
        free(data);
        data = NULL;
    }
    fclose(fp);
    *len = data ? (size_t)n : 0;
    return data;
}

#endif
