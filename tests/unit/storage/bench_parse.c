/* bench_parse.c — parse throughput on DC-taxi-like rows (not a test: run by hand, prints MB/s and rows/s). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataset.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    size_t rows = argc > 1 ? strtoul(argv[1], NULL, 10) : (size_t)1 << 20;
    char dir[] = "/tmp/traind-bench-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[256], url[256];
    snprintf(path, sizeof path, "%s/part-00000.csv", dir);
    snprintf(url, sizeof url, "%s/part-*.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "fare_amount,origin_lat,origin_lon,dest_lat,dest_lon,year,month,dow,hour\n");
    unsigned s = 1;
    for (size_t i = 0; i < rows; i++) {
        s = s * 1103515245u + 12345u;
        fprintf(f, "%.2f,%.4f,%.4f,%.4f,%.4f,%u,%u,%u,%u\n", 2.5 + (s >> 20) % 5000 / 100.0,
                38.8 + (s >> 8) % 2000 / 10000.0, -77.1 + (s >> 4) % 2000 / 10000.0,
                38.8 + (s >> 12) % 2000 / 10000.0, -77.1 + (s >> 6) % 2000 / 10000.0, 2015 + s % 5,
                1 + (s >> 3) % 12, s % 7, (s >> 5) % 24);
    }
    long bytes = ftell(f);
    fclose(f);
    for (int dt = 0; dt < 2; dt++) {
        struct dataset_config c = {.url = url, .header = DATASET_HEADER_AUTO, .dtype = dt ? STORE_F32 : STORE_F64,
                                   .batch_size = rows};
        struct dataset *ds;
        struct err e = {0};
        double t0 = now();
        if (dataset_open(&c, &ds, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        void *buf = malloc(rows * 9 * 8);
        size_t got;
        double t1 = now();
        if (!buf || dataset_next_batch(ds, buf, &got, NULL, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        double t2 = now();
        /* second epoch: served from the resident copy */
        if (dataset_next_batch(ds, buf, &got, NULL, &e))
            return 1;
        double t3 = now();
        printf("%s: %zu rows, %.1f MB: open %.3f s, first epoch (parse) %.3f s = %.0f MB/s, %.1f Mrows/s; "
               "resident epoch %.3f s\n",
               dt ? "float32" : "float64", got, bytes / 1e6, t1 - t0, t2 - t1, bytes / 1e6 / (t2 - t1),
               got / 1e6 / (t2 - t1), t3 - t2);
        free(buf);
        dataset_close(ds);
    }
    unlink(path);
    rmdir(dir);
    return 0;
}
