/* gen-dctaxi.c — writes a DC-taxi-like CSV dataset in kaen's layout, for the quick start, tests and benchmarks. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * Columns, as the PyTorch DC-taxi example's dev set has them: fare (the label), then
 * pickup latitude and longitude, dropoff latitude and longitude, year, month,
 * day of week, hour. The fare follows a metered tariff on the trip distance
 * plus noise, so a linear model can learn something and the raw magnitudes
 * (year ~2017, longitude ~-77) make unclipped SGD explode as in that example.
 * The output depends only on the seed and the row and partition counts.
 */

struct gen {
    uint64_t s;   /* splitmix64 state */
};

static uint64_t gen_u64(struct gen *g)
{
    uint64_t z = (g->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double gen_uniform(struct gen *g)
{
    return (double)(gen_u64(g) >> 11) * 0x1.0p-53;
}

static double gen_normal(struct gen *g)
{
    double u1 = gen_uniform(g), u2 = gen_uniform(g);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double clamp(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

static int write_row(FILE *f, struct gen *g)
{
    double plat = clamp(38.905 + 0.025 * gen_normal(g), 38.80, 38.99);
    double plon = clamp(-77.030 + 0.030 * gen_normal(g), -77.12, -76.91);
    double dlat = clamp(plat + 0.020 * gen_normal(g), 38.80, 38.99);
    double dlon = clamp(plon + 0.025 * gen_normal(g), -77.12, -76.91);
    int year = 2015 + (int)(gen_u64(g) % 5);
    int month = 1 + (int)(gen_u64(g) % 12);
    int dow = (int)(gen_u64(g) % 7);
    int hour = (int)(gen_u64(g) % 24);
    /* Miles: a degree of latitude is ~69 mi, of longitude at 38.9 N ~53.8 mi. */
    double miles = sqrt(pow((dlat - plat) * 69.0, 2) + pow((dlon - plon) * 53.8, 2)) * 1.25;
    double rush = (hour >= 7 && hour <= 9) || (hour >= 16 && hour <= 19) ? 1.5 : 0.0;
    double fare = 3.25 + 2.16 * miles + rush + 0.25 * (year - 2015) + 1.2 * gen_normal(g);
    if (fare < 3.25)
        fare = 3.25;
    return fprintf(f, "%.2f,%.6f,%.6f,%.6f,%.6f,%d,%d,%d,%d\n", fare, plat, plon, dlat, dlon,
                   year, month, dow, hour) < 0 ? -1 : 0;
}

static int mkdir_p(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: gen-dctaxi [--rows N] [--partitions P] [--seed S] [--header] DIR\n"
        "\n"
        "Writes DIR/part-00000.csv ... (fare, pickup lat, pickup lon, dropoff lat,\n"
        "dropoff lon, year, month, day of week, hour) and DIR/.meta/shards/shards.csv\n"
        "(id,count), the layout kaen's ObjectStorageDataset reads.\n"
        "Defaults: --rows 2200000 --partitions 11 --seed 0, no header row.\n");
}

int main(int argc, char **argv)
{
    uint64_t rows = 2200000, parts = 11, seed = 0;
    int header = 0;
    static const struct option opts[] = {
        {"rows", required_argument, NULL, 'r'},
        {"partitions", required_argument, NULL, 'p'},
        {"seed", required_argument, NULL, 's'},
        {"header", no_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "r:p:s:Hh", opts, NULL)) != -1) {
        char *end = NULL;
        const char *flag = c == 'r' ? "rows" : c == 'p' ? "partitions" : "seed";
        switch (c) {
        case 'r': rows = strtoull(optarg, &end, 10); break;
        case 'p': parts = strtoull(optarg, &end, 10); break;
        case 's': seed = strtoull(optarg, &end, 10); break;
        case 'H': header = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (end && *end) {
            fprintf(stderr, "gen-dctaxi: --%s: not a number: %s\n", flag, optarg);
            return 2;
        }
    }
    if (optind != argc - 1 || rows == 0 || parts == 0 || parts > 99999) {
        usage(stderr);
        return 2;
    }
    const char *dir = argv[optind];
    char path[4096];
    if (snprintf(path, sizeof path, "%s/.meta/shards", dir) >= (int)sizeof path || mkdir_p(path)) {
        fprintf(stderr, "gen-dctaxi: cannot create %s: %s\n", path, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/.meta/shards/shards.csv", dir);
    FILE *meta = fopen(path, "w");
    if (!meta || fprintf(meta, "id,count\n") < 0) {
        fprintf(stderr, "gen-dctaxi: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct gen g = {.s = seed * 0x2545F4914F6CDD1Dull + 1};
    for (uint64_t p = 0; p < parts; p++) {
        uint64_t n = rows / parts + (p < rows % parts ? 1 : 0);
        snprintf(path, sizeof path, "%s/part-%05" PRIu64 ".csv", dir, p);
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "gen-dctaxi: cannot write %s: %s\n", path, strerror(errno));
            return 1;
        }
        int bad = header && fprintf(f, "fareamount,origin_block_latitude,origin_block_longitude,"
                                       "destination_block_latitude,destination_block_longitude,"
                                       "year,month,dow,hour\n") < 0;
        for (uint64_t i = 0; i < n && !bad; i++)
            bad = write_row(f, &g) != 0;
        if (fclose(f) != 0 || bad || fprintf(meta, "%" PRIu64 ",%" PRIu64 "\n", p, n) < 0) {
            fprintf(stderr, "gen-dctaxi: writing %s failed: %s\n", path, strerror(errno));
            return 1;
        }
    }
    if (fclose(meta) != 0) {
        fprintf(stderr, "gen-dctaxi: writing shards metadata failed: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
