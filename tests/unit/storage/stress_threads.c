/* stress_threads.c — the storage threads under load, as a plain program so ThreadSanitizer can run it. */
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prefetch.h"
#include "store.h"

/*
 * Criterion's forking runner cannot start under -Db_sanitize=thread, so this one
 * is not a Criterion test: it exits 1 with a message on failure. A prefetcher
 * with a slow consumer holding two slots, shuffled partitions and rows, parser
 * threads and nothing resident (every epoch parses again, reusing memory), is
 * started and stopped several times mid-stream; each full epoch must deliver
 * every row exactly once, and a bad partition must fail after the good batches.
 * Then two such jobs run at once on one parsed-partition cache (twice: racing to
 * write it, then both mapping it).
 */

enum { PARTS = 6, ROWS = 4000, BATCH = 700 };

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "stress_threads: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static int write_data(const char *dir, int bad_part)
{
    for (int p = 0; p < PARTS; p++) {
        char path[512];
        snprintf(path, sizeof path, "%s/part-%05d.csv", dir, p);
        FILE *f = fopen(path, "w");
        if (!f)
            return -1;
        for (int r = 0; r < ROWS; r++) {
            int g = p * ROWS + r;
            if (p == bad_part && r == ROWS / 2)
                fprintf(f, "%d,x\n", g);
            else
                fprintf(f, "%d,%d.5\n", g, g);
        }
        if (fclose(f) != 0)
            return -1;
    }
    return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void remove_data(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int run(const char *url, const char *cache, int round, char *seen)
{
    struct store_remote remote = {.cache_dir = cache};
    struct dataset_config c = {.url = url, .remote = &remote, .header = DATASET_HEADER_NO, .dtype = STORE_F64,
                               .batch_size = BATCH, .seed = (uint64_t)round, .shuffle_partitions = true,
                               .shuffle_buffer = 1500, .resident_limit = 1, .parse_threads = 3};
    struct dataset *ds;
    struct prefetch *pf;
    struct err e = {0};
    if (dataset_open(&c, &ds, &e))
        return fail("dataset_open", e.msg);
    struct prefetch_config pc = {.slots = 3};
    if (prefetch_start(ds, &pc, &pf, &e)) {
        dataset_close(ds);
        return fail("prefetch_start", e.msg);
    }
    struct prefetch_slot held[2];
    int nh = 0, rc = 0;
    uint64_t epoch = 0, got = 0;
    for (int i = 0; i < 40 + 7 * round && rc == 0; i++) {
        struct prefetch_slot s;
        if (prefetch_next(pf, 30.0, &s, &e) || !s.data) {
            rc = fail("prefetch_next", e.msg);
            break;
        }
        const double *b = s.data;
        for (size_t r = 0; r < s.rows && rc == 0; r++) {
            long g = (long)b[2 * r];
            if (g < 0 || g >= PARTS * ROWS || b[2 * r + 1] != g + 0.5)
                rc = fail("a row was torn or overwritten", NULL);
            else if (seen[g] == (char)(s.cursor.epoch + 1))
                rc = fail("a row came twice in one epoch", NULL);
            else
                seen[g] = (char)(s.cursor.epoch + 1);
        }
        got += s.rows;
        if (s.next.epoch != s.cursor.epoch) {
            if (got != (uint64_t)PARTS * ROWS)
                rc = fail("an epoch missed rows", NULL);
            got = 0;
            epoch++;
        }
        if (nh == 2) {
            prefetch_release(pf, &held[0]);
            held[0] = held[1];
            nh = 1;
        }
        held[nh++] = s;
        if (i % 5 == 0)
            usleep(200); /* slower than the producer now and then: the ring fills */
    }
    for (int i = 0; i < nh; i++)
        prefetch_release(pf, &held[i]);
    prefetch_stop(pf); /* mid-stream, producer and parsers busy */
    dataset_close(ds);
    return rc;
}

static int bad_data_fails_after_the_good_batches(const char *url)
{
    struct dataset_config c = {.url = url, .header = DATASET_HEADER_NO, .dtype = STORE_F32, .batch_size = BATCH,
                               .parse_threads = 3};
    struct dataset *ds;
    struct prefetch *pf;
    struct err e = {0};
    if (dataset_open(&c, &ds, &e))
        return fail("dataset_open", e.msg);
    struct prefetch_config pc = {.slots = 4};
    if (prefetch_start(ds, &pc, &pf, &e)) {
        dataset_close(ds);
        return fail("prefetch_start", e.msg);
    }
    int good = 0, rc;
    struct prefetch_slot s;
    while ((rc = prefetch_next(pf, 30.0, &s, &e)) == ERR_OK && s.data) {
        good++;
        prefetch_release(pf, &s);
    }
    /* parts 0-2 hold 12000 rows, 17 full batches of 700; the 18th needs part 3, bad at its line 2001 */
    int ok = rc == ERR_INVALID_DATA && good == 17 && strstr(e.msg, "part-00003.csv: line 2001, column 2");
    prefetch_stop(pf);
    dataset_close(ds);
    return ok ? 0 : fail("the bad partition's error did not come after the 17 good batches", e.msg);
}

struct job {
    const char *url, *cache;
    int round, rc;
    char *seen;
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    j->rc = run(j->url, j->cache, j->round, j->seen);
    return NULL;
}

/* Two jobs at once on one cache dir, each checking its own rows. */
static int two_jobs_share_a_cache(const char *url, const char *cache, int round)
{
    struct job j[2];
    pthread_t t[2];
    int started = 0, rc = 0;
    for (int i = 0; i < 2; i++) {
        j[i] = (struct job){url, cache, round, 0, calloc(PARTS * ROWS, 1)};
        if (!j[i].seen || pthread_create(&t[i], NULL, run_job, &j[i]) != 0) {
            rc = fail("starting a job thread", NULL);
            free(j[i].seen);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        rc = rc ? rc : j[i].rc;
        free(j[i].seen);
    }
    return rc;
}

int main(void)
{
    char dir[] = "/tmp/traind-stress-XXXXXX";
    if (!mkdtemp(dir))
        return fail("mkdtemp", NULL);
    char url[512];
    snprintf(url, sizeof url, "%s/part-*.csv", dir);
    char *seen = calloc(PARTS * ROWS, 1);
    int rc = !seen || write_data(dir, -1) ? fail("writing data", NULL) : 0;
    for (int round = 0; round < 4 && rc == 0; round++) {
        memset(seen, 0, PARTS * ROWS);
        rc = run(url, NULL, round, seen);
    }
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    for (int round = 0; round < 2 && rc == 0; round++)
        rc = two_jobs_share_a_cache(url, cache, round);
    if (rc == 0)
        rc = write_data(dir, 3) ? fail("writing data", NULL) : bad_data_fails_after_the_good_batches(url);
    free(seen);
    remove_data(dir);
    if (rc == 0)
        printf("stress_threads: ok\n");
    return rc;
}
