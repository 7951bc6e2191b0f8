/* test_pcache.c — the parsed-partition cache: hits across datasets and epochs, staleness, corruption, eviction, sharing. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "store.h"
#include "store_remote.h"
#include "tmpdir.h"

static char *dir;
static char *data_dir, *cache_dir, *parsed_dir;
static char url[4096];

static void setup(void)
{
    dir = tmp_make();
    tmp_mkdir(dir, "data");
    data_dir = tmp_path(dir, "data");
    cache_dir = tmp_path(dir, "cache");
    parsed_dir = tmp_path(dir, "cache/parsed");
    snprintf(url, sizeof url, "%s/part-*.csv", data_dir);
}

static void teardown(void)
{
    tmp_remove(dir);
    free(data_dir);
    free(cache_dir);
    free(parsed_dir);
    dir = NULL;
}

TestSuite(storage, .init = setup, .fini = teardown);

static const int part_rows[3] = {50, 70, 40};

/* Partition p, 4 columns: global row g holds g*10 + c + 0.25 in CSV column c (header line first). */
static void write_partition(int p, int extra_rows)
{
    int g = 0;
    for (int q = 0; q < p; q++)
        g += part_rows[q];
    char name[32], text[8192];
    size_t n = (size_t)snprintf(text, sizeof text, "a,b,fare,d\n");
    for (int r = 0; r < part_rows[p] + extra_rows; r++, g++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%d.25,%d.25,%d.25,%d.25\n", g * 10, g * 10 + 1,
                              g * 10 + 2, g * 10 + 3);
    snprintf(name, sizeof name, "part-%05d.csv", p);
    tmp_write_n(data_dir, name, text, n);
}

static void write_partitions(void)
{
    for (int p = 0; p < 3; p++)
        write_partition(p, 0);
}

struct opts {
    enum store_dtype dtype;
    int label;
    uint64_t cache_limit;
    size_t resident_limit;
    int threads;
    bool shuffle;
    bool views;           /* read through dataset_next_view: rows go into one buffer, cached ones read there */
    const char *shards;   /* kaen's shards metadata (row counts known at open), or NULL */
};

static struct dataset *open_with(const struct opts *o)
{
    char *dir_copy = strdup(cache_dir); /* gone once open: the dataset keeps its own copy */
    struct store_remote r = {.cache_dir = dir_copy, .cache_limit = o->cache_limit};
    struct dataset_config c = {.url = url, .remote = &r, .header = DATASET_HEADER_AUTO, .label_column = o->label,
                               .dtype = o->dtype, .batch_size = 16, .resident_limit = o->resident_limit,
                               .parse_threads = o->threads, .seed = 9, .shuffle_partitions = o->shuffle,
                               .shuffle_buffer = o->shuffle ? 64 : 0, .shards_url = o->shards};
    struct dataset *ds = NULL;
    struct err e = {0};
    int rc = dataset_open(&c, &ds, &e);
    memset(dir_copy, 'x', strlen(dir_copy));
    free(dir_copy);
    cr_assert_eq(rc, ERR_OK, "dataset_open: %s", e.msg);
    return ds;
}

static const struct opts f64 = {.dtype = STORE_F64, .label = 2, .threads = -1};

/* Every row of `epochs` epochs, in the order served, malloc'ed; *len gets the bytes. views: each batch
 * from dataset_next_view where it gives one. */
static char *read_epochs(struct dataset *ds, int epochs, bool views, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *all = malloc(cap);
    char *b = malloc(dataset_batch_bytes(ds));
    cr_assert(all && b);
    struct dataset_cursor at;
    do {
        size_t rows;
        struct err e = {0};
        const void *v = NULL;
        if (views)
            cr_assert_eq(dataset_next_view(ds, &v, &rows, &at, &e), ERR_OK, "%s", e.msg);
        if (!v)
            cr_assert_eq(dataset_next_batch(ds, b, &rows, &at, &e), ERR_OK, "%s", e.msg);
        size_t bytes = rows * dataset_row_bytes(ds);
        if (n + bytes > cap) {
            cap = 2 * (n + bytes);
            cr_assert_not_null(all = realloc(all, cap));
        }
        memcpy(all + n, v ? v : b, bytes);
        n += bytes;
        dataset_tell(ds, &at);
    } while (at.epoch < (uint64_t)epochs);
    free(b);
    *len = n;
    return all;
}

/* Opens, reads one epoch, closes: the epoch's bytes and the dataset's stats. */
static char *one_job(const struct opts *o, size_t *len, struct dataset_stats *s)
{
    struct dataset *ds = open_with(o);
    char *all = read_epochs(ds, 1, o->views, len);
    dataset_stats(ds, s);
    dataset_close(ds);
    return all;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names of the finished files in parsed/ (temps excluded), sorted; *n gets the count. */
static char **parsed_files(size_t *n)
{
    char **v = calloc(64, sizeof *v);
    *n = 0;
    DIR *d = opendir(parsed_dir);
    cr_assert_not_null(d, "no %s", parsed_dir);
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL)
        if (ent->d_name[0] != '.' && *n < 64)
            v[(*n)++] = strdup(ent->d_name);
    closedir(d);
    qsort(v, *n, sizeof *v, by_name);
    return v;
}

static bool has(char **v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], name) == 0)
            return true;
    return false;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void set_mtime(const char *folder, const char *name, time_t t)
{
    char *p = tmp_path(folder, name);
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0, "utimensat %s", p);
    free(p);
}

static off_t file_size(const char *folder, const char *name)
{
    char *p = tmp_path(folder, name);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0, "stat %s", p);
    free(p);
    return st.st_size;
}

Test(storage, a_second_job_maps_every_partition_and_parses_none)
{
    write_partitions();
    struct opts o = f64;
    o.threads = 0; /* parsers ahead write the cache too */
    struct dataset_stats s1, s2;
    size_t n1, n2;
    char *a = one_job(&o, &n1, &s1);
    cr_assert_eq(s1.parsed, 3);
    cr_assert_eq(s1.cache_misses, 3);
    cr_assert_eq(s1.cache_hits, 0);
    char *b = one_job(&o, &n2, &s2);
    cr_assert_eq(s2.parsed, 0);
    cr_assert_eq(s2.cache_hits, 3);
    cr_assert_eq(n1, n2);
    cr_assert_eq(n1, (size_t)(50 + 70 + 40) * 4 * sizeof(double));
    cr_assert(memcmp(a, b, n1) == 0, "batches from the cache differ from parsed ones");
    free(a);
    free(b);
}

Test(storage, a_dataset_too_big_to_keep_maps_its_partitions_each_epoch_instead_of_parsing)
{
    write_partitions();
    struct opts o = f64;
    o.resident_limit = 1; /* nothing resident: every epoch reads every partition again */
    struct dataset *ds = open_with(&o);
    size_t n;
    free(read_epochs(ds, 3, false, &n));
    struct dataset_stats s;
    dataset_stats(ds, &s);
    dataset_close(ds);
    cr_assert_eq(s.parsed, 3);
    cr_assert_eq(s.cache_hits, 6);
}

Test(storage, a_partition_whose_size_changed_is_parsed_again)
{
    write_partitions();
    struct dataset_stats s;
    size_t n1, n2;
    free(one_job(&f64, &n1, &s));
    write_partition(1, 2);
    free(one_job(&f64, &n2, &s));
    cr_assert_eq(s.cache_hits, 2);
    cr_assert_eq(s.cache_misses, 1);
    cr_assert_eq(s.parsed, 1);
    cr_assert_eq(n2, n1 + 2 * 4 * sizeof(double));
}

Test(storage, a_partition_whose_mtime_changed_is_parsed_again)
{
    write_partitions();
    struct dataset_stats s;
    size_t n;
    free(one_job(&f64, &n, &s));
    set_mtime(data_dir, "part-00002.csv", 1000000000);
    free(one_job(&f64, &n, &s));
    cr_assert_eq(s.cache_hits, 2);
    cr_assert_eq(s.parsed, 1);
}

/* dir/shards.csv: kaen's row counts of the three partitions, the second's given as `second`; its path. */
static char *write_shards(int second)
{
    char text[128];
    snprintf(text, sizeof text, "id,count\n0,%d\n1,%d\n2,%d\n", part_rows[0], second, part_rows[2]);
    tmp_write(dir, "shards.csv", text);
    return tmp_path(dir, "shards.csv");
}

/*
 * Damages the first parsed file with `damage`, then checks the next job ignores it and writes a good
 * one. into: the next job knows its counts (shards metadata) and reads through views, so cached rows
 * are read into its one buffer (pcache_load's into) rather than mapped.
 */
static void check_damage_is_repaired(void (*damage)(const char *path, off_t size), bool into)
{
    write_partitions();
    struct dataset_stats s;
    size_t n1, n2;
    char *a = one_job(&f64, &n1, &s);
    size_t nf;
    char **names = parsed_files(&nf);
    cr_assert_eq(nf, 3);
    off_t size = file_size(parsed_dir, names[0]);
    char *p = tmp_path(parsed_dir, names[0]);
    damage(p, size);
    struct opts o = f64;
    char *shards = write_shards(part_rows[1]);
    if (into) {
        o.views = true;
        o.shards = shards;
    }
    char *b = one_job(&o, &n2, &s);
    cr_assert_eq(s.cache_hits, 2);
    cr_assert_eq(s.parsed, 1);
    cr_assert_eq(n1, n2);
    cr_assert(memcmp(a, b, n1) == 0, "a damaged cache file was served");
    cr_assert_eq(file_size(parsed_dir, names[0]), size, "the damaged file was not replaced");
    free(shards);
    free(p);
    free_names(names, nf);
    free(a);
    free(b);
}

static void truncate_by_8(const char *path, off_t size)
{
    cr_assert_eq(truncate(path, size - 8), 0);
}

static void flip_a_value_byte(const char *path, off_t size)
{
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    unsigned char c;
    off_t at = size - 13; /* in the last row, past the header */
    cr_assert_eq(pread(fd, &c, 1, at), 1);
    c ^= 0x10;
    cr_assert_eq(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

Test(storage, a_truncated_cache_file_is_ignored_and_replaced)
{
    check_damage_is_repaired(truncate_by_8, false);
}

Test(storage, a_cache_file_with_a_changed_byte_is_ignored_and_replaced)
{
    check_damage_is_repaired(flip_a_value_byte, false);
}

Test(storage, read_into_one_buffer_a_truncated_cache_file_is_ignored_and_replaced)
{
    check_damage_is_repaired(truncate_by_8, true);
}

Test(storage, read_into_one_buffer_a_cache_file_with_a_changed_byte_is_ignored_and_replaced)
{
    check_damage_is_repaired(flip_a_value_byte, true);
}

/* Mappings of files under the cache's parsed/ folder in this process. */
static int mapped_cache_files(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, parsed_dir) != NULL;
    fclose(f);
    return n;
}

Test(storage, a_job_with_known_counts_reads_cached_rows_into_its_buffer_and_keeps_none_mapped)
{
    write_partitions();
    struct dataset_stats s;
    size_t n1, n2;
    char *a = one_job(&f64, &n1, &s);
    struct opts o = f64;
    o.views = true;
    o.shards = write_shards(part_rows[1]);
    for (int threads = -1; threads <= 1; threads += 2) { /* the reader alone, and one parser ahead */
        o.threads = threads;
        struct dataset *ds = open_with(&o);
        char *b = read_epochs(ds, 2, true, &n2);
        dataset_stats(ds, &s);
        cr_assert_eq(s.cache_hits, 3, "%d threads", threads);
        cr_assert_eq(s.parsed, 0, "%d threads", threads);
        cr_assert_eq(n2, 2 * n1, "%d threads", threads);
        cr_assert(memcmp(a, b, n1) == 0 && memcmp(a, b + n1, n1) == 0, "%d threads: rows differ", threads);
        /* Nothing stays mapped: eviction may take every file while the dataset still trains. */
        cr_assert_eq(mapped_cache_files(), 0, "%d threads", threads);
        free(b);
        dataset_close(ds);
    }
    free((char *)o.shards);
    free(a);
}

Test(storage, a_cached_file_with_another_count_than_the_shards_metadata_is_an_error_saying_so)
{
    write_partitions();
    struct dataset_stats s;
    size_t n;
    free(one_job(&f64, &n, &s));
    struct opts o = f64;
    o.views = true;
    o.shards = write_shards(part_rows[1] + 3);
    struct dataset *ds = open_with(&o);
    struct err e = {0};
    int rc = ERR_OK;
    for (int i = 0; i < 20 && rc == ERR_OK; i++) {
        const void *v;
        size_t rows;
        struct dataset_cursor at;
        rc = dataset_next_view(ds, &v, &rows, &at, &e);
    }
    cr_assert_eq(rc, ERR_INVALID_DATA, "%s", e.msg);
    cr_assert(strstr(e.msg, "part-00001.csv") && strstr(e.msg, "70 rows, but shards metadata says 73"), "%s", e.msg);
    dataset_close(ds);
    free((char *)o.shards);
}

/* Files of one job, named by comparing parsed/ before and after it: *n of them. */
static char **job_files(const struct opts *o, size_t *n)
{
    size_t nb, na, len;
    struct dataset_stats s;
    char **before = parsed_files(&nb);
    free(one_job(o, &len, &s));
    char **after = parsed_files(&na);
    char **v = calloc(na + 1, sizeof *v);
    *n = 0;
    for (size_t i = 0; i < na; i++)
        if (!has(before, nb, after[i]))
            v[(*n)++] = strdup(after[i]);
    free_names(before, nb);
    free_names(after, na);
    return v;
}

static off_t total_size(char **v, size_t n)
{
    off_t t = 0;
    for (size_t i = 0; i < n; i++)
        t += file_size(parsed_dir, v[i]);
    return t;
}

Test(storage, eviction_removes_the_least_recently_used_parsed_files_first)
{
    write_partitions();
    tmp_mkdir(dir, "cache");
    tmp_mkdir(dir, "cache/parsed");
    struct opts x = f64, y = f64, z = f64;
    y.dtype = STORE_F32;
    z.label = 0; /* another key, the same sizes as x's */
    size_t nx, ny, nz;
    char **xs = job_files(&x, &nx), **ys = job_files(&y, &ny);
    cr_assert_eq(nx, 3);
    cr_assert_eq(ny, 3);
    for (size_t i = 0; i < 3; i++) {
        set_mtime(parsed_dir, xs[i], 1000 + (time_t)i); /* x: used longest ago */
        set_mtime(parsed_dir, ys[i], 2000 + (time_t)i);
    }
    z.cache_limit = (uint64_t)(total_size(xs, nx) + total_size(ys, ny));
    char **zs = job_files(&z, &nz);
    cr_assert_eq(nz, 3);
    size_t n;
    char **now = parsed_files(&n);
    for (size_t i = 0; i < 3; i++) {
        cr_assert(!has(now, n, xs[i]), "the older file %s was kept", xs[i]);
        cr_assert(has(now, n, ys[i]), "the newer file %s was evicted", ys[i]);
    }
    cr_assert_eq(n, 6);
    free_names(now, n);
    free_names(xs, nx);
    free_names(ys, ny);
    free_names(zs, nz);
}

Test(storage, eviction_never_removes_a_parsed_file_an_open_dataset_has_mapped)
{
    write_partitions();
    tmp_mkdir(dir, "cache");
    tmp_mkdir(dir, "cache/parsed");
    size_t na, len1, len2;
    char **as = job_files(&f64, &na);
    cr_assert_eq(na, 3);
    for (size_t i = 0; i < na; i++)
        set_mtime(parsed_dir, as[i], 1000); /* first in line for eviction */
    struct dataset *held = open_with(&f64);
    char *before = read_epochs(held, 1, false, &len1); /* maps all three and keeps them */
    struct opts b = f64;
    b.dtype = STORE_F32;
    b.cache_limit = 1;
    struct dataset_stats s;
    free(one_job(&b, &len2, &s));
    cr_assert_eq(s.cache_evictions, 2, "the small limit evicts the files not in use (the job's own older ones)");
    size_t n;
    char **now = parsed_files(&n);
    for (size_t i = 0; i < na; i++)
        cr_assert(has(now, n, as[i]), "%s was evicted while mapped", as[i]);
    char *after = read_epochs(held, 2, false, &len2);
    cr_assert_eq(len1, len2);
    cr_assert(memcmp(before, after, len1) == 0);
    dataset_close(held);
    free_names(now, n);
    free_names(as, na);
    free(before);
    free(after);
}

Test(storage, a_cached_file_truncated_while_a_dataset_holds_its_rows_changes_nothing_it_reads)
{
    write_partitions();
    tmp_mkdir(dir, "cache");
    tmp_mkdir(dir, "cache/parsed");
    size_t na, len1, len2;
    char **as = job_files(&f64, &na);
    cr_assert_eq(na, 3);
    struct dataset *held = open_with(&f64);
    char *before = read_epochs(held, 1, false, &len1); /* every partition from the cache, kept */
    for (size_t i = 0; i < na; i++) {
        char *p = tmp_path(parsed_dir, as[i]);
        cr_assert_eq(truncate(p, 0), 0, "truncate %s", p);
        free(p);
    }
    char *after = read_epochs(held, 2, false, &len2); /* rows in a mapping of those files would raise SIGBUS */
    cr_assert_eq(len1, len2);
    cr_assert(memcmp(before, after, len1) == 0);
    dataset_close(held);
    free_names(as, na);
    free(before);
    free(after);
}

struct job {
    struct opts o;
    char *bytes;
    size_t len;
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    struct dataset *ds = open_with(&j->o);
    j->bytes = read_epochs(ds, 3, false, &j->len);
    dataset_close(ds);
    return NULL;
}

Test(storage, two_jobs_at_once_on_one_cache_read_the_same_rows_and_write_each_file_once)
{
    write_partitions();
    struct opts o = {.dtype = STORE_F32, .label = 2, .threads = 2, .shuffle = true, .resident_limit = 1};
    struct job j[2] = {{.o = o}, {.o = o}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, run_job, &j[i]), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    cr_assert_eq(j[0].len, j[1].len);
    cr_assert_eq(j[0].len, (size_t)3 * (50 + 70 + 40) * 4 * sizeof(float));
    cr_assert(memcmp(j[0].bytes, j[1].bytes, j[0].len) == 0, "two jobs on one cache read different rows");
    size_t n;
    char **names = parsed_files(&n);
    cr_assert_eq(n, 3, "one file a partition, no temp left behind");
    free_names(names, n);
    /* and the rows are the ones a job without a cache reads */
    struct store_remote none = {0};
    struct dataset_config c = {.url = url, .remote = &none, .label_column = 2, .dtype = STORE_F32,
                               .batch_size = 16, .resident_limit = 1, .parse_threads = -1, .seed = 9,
                               .shuffle_partitions = true, .shuffle_buffer = 64};
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    size_t len;
    char *ref = read_epochs(ds, 3, false, &len);
    dataset_close(ds);
    cr_assert_eq(len, j[0].len);
    cr_assert(memcmp(ref, j[0].bytes, len) == 0, "the cached rows differ from parsed ones");
    free(ref);
    free(j[0].bytes);
    free(j[1].bytes);
}

static int open_descriptors(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

Test(storage, a_dataset_of_many_mapped_partitions_holds_a_bounded_number_of_descriptors)
{
    for (int p = 0; p < 300; p++) {
        char name[32];
        snprintf(name, sizeof name, "part-%05d.csv", p);
        tmp_write(data_dir, name, "1,2\n3,4\n");
    }
    struct opts o = {.dtype = STORE_F32, .threads = -1};
    struct dataset_stats s;
    size_t n;
    free(one_job(&o, &n, &s));
    int before = open_descriptors();
    struct dataset *ds = open_with(&o);
    free(read_epochs(ds, 1, false, &n));
    dataset_stats(ds, &s);
    cr_assert_eq(s.cache_hits, 300);
    int held = open_descriptors() - before;
    dataset_close(ds);
    cr_assert_leq(held, 256 + 2, "%d descriptors held for 300 mapped partitions", held);
    cr_assert_geq(held, 256, "the first 256 maps hold their locks (%d descriptors)", held);
}

/* ---- evictions at once (a job's parser threads, or two jobs on one cache) ---- */

struct evictor {
    pthread_barrier_t *start;
    const char *keep;
};

static void *evict_at_once(void *arg)
{
    struct evictor *ev = arg;
    pthread_barrier_wait(ev->start);
    store_cache_evict(cache_dir, 150, ev->keep);
    return NULL;
}

static char *cache_file(const char *name, int round)
{
    char *path;
    cr_assert(asprintf(&path, "%s/%s-%d", cache_dir, name, round) > 0);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 100; i++)
        fputc('x', f);
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* Each keeps the file it just wrote; over the limit together, one of the two must stay. */
Test(storage, two_evictions_at_once_never_remove_both_files_they_keep)
{
    tmp_mkdir(dir, "cache");
    pthread_barrier_t start;
    cr_assert_eq(pthread_barrier_init(&start, NULL, 2), 0);
    for (int round = 0; round < 300; round++) {
        char *a = cache_file("a", round), *b = cache_file("b", round);
        struct evictor ea = {&start, a}, eb = {&start, b};
        pthread_t ta, tb;
        cr_assert_eq(pthread_create(&ta, NULL, evict_at_once, &ea), 0);
        cr_assert_eq(pthread_create(&tb, NULL, evict_at_once, &eb), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        bool kept_a = access(a, F_OK) == 0, kept_b = access(b, F_OK) == 0;
        cr_assert(kept_a || kept_b, "round %d: both kept files were evicted", round);
        cr_assert(!(kept_a && kept_b), "round %d: 200 bytes kept under a limit of 150", round);
        unlink(a);
        unlink(b);
        free(a);
        free(b);
    }
    pthread_barrier_destroy(&start);
}
