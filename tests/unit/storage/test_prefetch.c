/* test_prefetch.c — the prefetch ring: dataset order, slots never overwritten while held, errors, stop, counters. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prefetch.h"
#include "tmpdir.h"

TMP_SUITE(storage);
static char url[4096];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* n partitions of `rows` rows, 3 columns: global row g holds (g, -g, g + 0.5). */
static int write_partitions(int n, int rows)
{
    int g = 0;
    for (int p = 0; p < n; p++) {
        char name[32];
        char *text = malloc(48 * (size_t)rows + 1);
        size_t len = 0;
        for (int r = 0; r < rows; r++, g++)
            len += (size_t)sprintf(text + len, "%d,%d,%d.5\n", g, -g, g);
        snprintf(name, sizeof name, "part-%05d.csv", p);
        tmp_write_n(dir, name, text, len);
        free(text);
    }
    return g;
}

static struct dataset *open_ds(size_t batch, uint64_t seed, size_t buffer)
{
    snprintf(url, sizeof url, "%s/part-*.csv", dir);
    struct dataset_config c = {.url = url, .header = DATASET_HEADER_NO, .dtype = STORE_F64, .batch_size = batch,
                               .seed = seed, .shuffle_partitions = seed != 0, .shuffle_buffer = buffer};
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "dataset_open: %s", e.msg);
    return ds;
}

static struct prefetch *start(struct dataset *ds, size_t slots, const struct prefetch_allocator *a)
{
    struct prefetch_config cfg = {.slots = slots, .allocator = a};
    struct prefetch *pf = NULL;
    struct err e = {0};
    cr_assert_eq(prefetch_start(ds, &cfg, &pf, &e), ERR_OK, "prefetch_start: %s", e.msg);
    return pf;
}

static void next_ok(struct prefetch *pf, struct prefetch_slot *s)
{
    struct err e = {0};
    cr_assert_eq(prefetch_next(pf, 10.0, s, &e), ERR_OK, "prefetch_next: %s", e.msg);
    cr_assert_not_null(s->data, "prefetch_next timed out after 10 s");
}

Test(storage, prefetched_batches_come_in_dataset_next_batch_order)
{
    write_partitions(5, 37);
    struct dataset *direct = open_ds(16, 3, 20), *fed = open_ds(16, 3, 20);
    struct prefetch *pf = start(fed, 3, NULL);
    double want[16 * 3];
    for (int i = 0; i < 40; i++) {
        size_t rows;
        struct dataset_cursor at, next;
        struct err e = {0};
        cr_assert_eq(dataset_next_batch(direct, want, &rows, &at, &e), ERR_OK, "%s", e.msg);
        dataset_tell(direct, &next);
        struct prefetch_slot s;
        next_ok(pf, &s);
        cr_assert_eq(s.rows, rows, "batch %d", i);
        cr_assert_eq(s.cursor.epoch, at.epoch, "batch %d", i);
        cr_assert_eq(s.cursor.batch, at.batch, "batch %d", i);
        cr_assert_eq(s.next.epoch, next.epoch, "batch %d", i);
        cr_assert_eq(s.next.batch, next.batch, "batch %d", i);
        cr_assert_arr_eq(s.data, want, rows * 3 * sizeof(double), "batch %d", i);
        prefetch_release(pf, &s);
    }
    prefetch_stop(pf);
    dataset_close(fed);
    dataset_close(direct);
}

/* An allocator that puts sentinel bytes on both sides of every slot and counts calls. */
#define GUARD 64
struct guarded {
    pthread_mutex_t mu;
    int allocs, frees;
    size_t bytes;
};

static void *guarded_alloc(void *ctx, size_t bytes)
{
    struct guarded *g = ctx;
    unsigned char *p = malloc(bytes + 2 * GUARD);
    if (!p)
        return NULL;
    memset(p, 0xA5, GUARD);
    memset(p + GUARD + bytes, 0x5A, GUARD);
    pthread_mutex_lock(&g->mu);
    g->allocs++;
    g->bytes = bytes;
    pthread_mutex_unlock(&g->mu);
    return p + GUARD;
}

static void guarded_check(struct guarded *g, void *q)
{
    unsigned char *p = (unsigned char *)q - GUARD;
    for (size_t i = 0; i < GUARD; i++) {
        cr_assert_eq(p[i], 0xA5, "bytes written before a slot");
        cr_assert_eq(p[GUARD + g->bytes + i], 0x5A, "bytes written after a slot");
    }
}

static void guarded_free(void *ctx, void *q)
{
    struct guarded *g = ctx;
    guarded_check(g, q);
    pthread_mutex_lock(&g->mu);
    g->frees++;
    pthread_mutex_unlock(&g->mu);
    free((unsigned char *)q - GUARD);
}

Test(storage, a_held_slot_is_never_overwritten_before_release)
{
    int total = write_partitions(4, 50);
    struct dataset *ds = open_ds(8, 0, 0);
    struct guarded g = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct prefetch_allocator a = {guarded_alloc, guarded_free, &g};
    struct prefetch *pf = start(ds, 3, &a);
    cr_assert_eq(g.allocs, 3, "one allocation per slot, at start");
    /* hold two slots at a time, slower than the producer, and check both stayed as delivered */
    struct prefetch_slot held[2];
    double copy[2][8 * 3];
    int g_next = 0;
    for (int i = 0; i < 60; i++) {
        struct prefetch_slot *s = &held[i % 2];
        if (i >= 2) {
            sleep_ms(2); /* the producer fills the third slot and waits */
            cr_assert_arr_eq(s->data, copy[i % 2], s->rows * 3 * sizeof(double), "slot changed while held");
            guarded_check(&g, s->data);
            prefetch_release(pf, s);
        }
        next_ok(pf, s);
        const double *b = s->data;
        for (size_t r = 0; r < s->rows; r++, g_next = (g_next + 1) % total)
            cr_assert_eq(b[3 * r], g_next, "batch %d row %zu", i, r);
        memcpy(copy[i % 2], s->data, s->rows * 3 * sizeof(double));
    }
    struct prefetch_stats st;
    prefetch_stats(pf, &st);
    cr_assert_eq(st.held, 2);
    cr_assert_leq(st.ready, 1, "only one slot can be filled while two are held");
    prefetch_release(pf, &held[0]);
    prefetch_release(pf, &held[1]);
    prefetch_stop(pf);
    cr_assert_eq(g.allocs, 3, "slots are allocated once");
    cr_assert_eq(g.frees, 3, "every slot freed at stop");
    dataset_close(ds);
}

Test(storage, an_error_in_the_data_reaches_the_consumer_after_the_good_batches)
{
    write_partitions(2, 10); /* rows 0..19 */
    tmp_write(dir, "part-00002.csv", "20,-20,20.5\n21,-21,21.5\n22,oops,22.5\n23,-23,23.5\n");
    struct dataset *ds = open_ds(5, 0, 0);
    struct prefetch *pf = start(ds, 2, NULL);
    for (int i = 0; i < 4; i++) {
        struct prefetch_slot s;
        next_ok(pf, &s);
        cr_assert_eq(s.rows, 5);
        cr_assert_eq(((double *)s.data)[0], 5 * i);
        prefetch_release(pf, &s);
    }
    for (int again = 0; again < 2; again++) {
        struct prefetch_slot s;
        struct err e = {0};
        cr_assert_eq(prefetch_next(pf, 10.0, &s, &e), ERR_INVALID_DATA, "got %d: %s", e.code, e.msg);
        cr_assert_null(s.data);
        cr_assert_not_null(strstr(e.msg, "part-00002.csv: line 3, column 2: not a number"), "%s", e.msg);
    }
    prefetch_stop(pf);
    dataset_close(ds);
}

Test(storage, unavailable_data_reaches_the_consumer_with_its_code)
{
    write_partitions(2, 10);
    struct dataset *ds = open_ds(5, 0, 0);
    char *p1 = tmp_path(dir, "part-00001.csv");
    cr_assert_eq(unlink(p1), 0); /* listed at open, gone when its turn comes */
    free(p1);
    struct prefetch *pf = start(ds, 2, NULL);
    struct prefetch_slot s;
    for (int i = 0; i < 2; i++) {
        next_ok(pf, &s);
        prefetch_release(pf, &s);
    }
    struct err e = {0};
    int rc = prefetch_next(pf, 10.0, &s, &e);
    cr_assert(rc == ERR_DATA_UNAVAILABLE || rc == ERR_IO, "got %d: %s", rc, e.msg);
    cr_assert_not_null(strstr(e.msg, "part-00001.csv"), "%s", e.msg);
    prefetch_stop(pf);
    dataset_close(ds);
}

Test(storage, stop_while_the_producer_waits_on_a_full_ring_is_prompt)
{
    write_partitions(2, 100);
    struct dataset *ds = open_ds(10, 0, 0);
    struct prefetch *pf = start(ds, 2, NULL);
    struct prefetch_stats st;
    double t0 = now_s();
    do {
        sleep_ms(1);
        prefetch_stats(pf, &st);
    } while (st.ready < 2 && now_s() - t0 < 10);
    cr_assert_eq(st.ready, 2, "the ring never filled");
    sleep_ms(20);
    double t1 = now_s();
    prefetch_stop(pf);
    double took = now_s() - t1;
    /* woken at once, not left to a timed wait: generous for loaded CI machines, far below a hang */
    cr_assert_lt(took, 1.0, "prefetch_stop took %.3f s", took);
    dataset_close(ds);
}

Test(storage, next_times_out_while_the_consumer_holds_every_slot)
{
    write_partitions(1, 100);
    struct dataset *ds = open_ds(10, 0, 0);
    struct prefetch *pf = start(ds, 2, NULL);
    struct prefetch_slot a, b, c;
    next_ok(pf, &a);
    next_ok(pf, &b);
    struct prefetch_stats before, after;
    prefetch_stats(pf, &before);
    struct err e = {0};
    double t0 = now_s();
    cr_assert_eq(prefetch_next(pf, 0.05, &c, &e), ERR_OK, "%s", e.msg);
    double took = now_s() - t0;
    cr_assert_null(c.data, "a batch appeared with no free slot to fill");
    cr_assert_geq(took, 0.05);
    prefetch_stats(pf, &after);
    cr_assert_geq(after.wait_seconds - before.wait_seconds, 0.05, "the wait was not counted");
    prefetch_release(pf, &b);
    next_ok(pf, &c);
    cr_assert_eq(((double *)c.data)[0], 20);
    prefetch_release(pf, &a);
    prefetch_release(pf, &c);
    prefetch_stop(pf);
    dataset_close(ds);
}

Test(storage, releasing_a_slot_twice_does_not_hand_it_out_twice)
{
    write_partitions(1, 100);
    struct dataset *ds = open_ds(10, 0, 0);
    struct prefetch *pf = start(ds, 3, NULL);
    struct prefetch_slot a, b, c;
    next_ok(pf, &a);
    prefetch_release(pf, &a);
    prefetch_release(pf, &a);
    next_ok(pf, &b);
    next_ok(pf, &c);
    cr_assert_neq(b.data, c.data, "one slot handed out twice");
    struct prefetch_stats st;
    prefetch_stats(pf, &st);
    cr_assert_eq(st.held, 2);
    cr_assert_leq(st.ready + st.held, st.slots);
    prefetch_release(pf, &b);
    prefetch_release(pf, &c);
    prefetch_stop(pf);
    dataset_close(ds);
}

Test(storage, counters_add_up)
{
    int total = write_partitions(3, 1000);
    struct dataset *ds = open_ds(64, 0, 0);
    double t0 = now_s();
    struct prefetch *pf = start(ds, 4, NULL);
    uint64_t rows = 0;
    for (int i = 0; i < 100; i++) {
        struct prefetch_slot s;
        next_ok(pf, &s);
        rows += s.rows;
        prefetch_release(pf, &s);
    }
    struct prefetch_stats st;
    prefetch_stats(pf, &st);
    double elapsed = now_s() - t0;
    cr_assert_eq(st.batches, 100);
    cr_assert_eq(st.rows, rows);
    uint64_t want = 0, left = (uint64_t)total; /* batches of 64, a short one at each epoch's end */
    for (int i = 0; i < 100; i++) {
        uint64_t take = left < 64 ? left : 64;
        want += take;
        left = left == take ? (uint64_t)total : left - take;
    }
    cr_assert_eq(rows, want);
    cr_assert_eq(st.bytes, rows * 3 * sizeof(double));
    cr_assert_eq(st.slots, 4);
    cr_assert_eq(st.held, 0);
    cr_assert_leq(st.ready, 4);
    cr_assert(st.wait_seconds >= 0 && st.wait_seconds <= elapsed, "wait %.6f s of %.6f s", st.wait_seconds,
              elapsed);
    prefetch_stop(pf);
    dataset_close(ds);
}

/* Threads of this process (by task id) whose blocked-signal mask has both SIGTERM and SIGINT. */
static int blocked_in(const char *tid)
{
    char path[128], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%.20s/status", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    unsigned long long mask = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "SigBlk: %llx", &mask) == 1)
            break;
    fclose(f);
    unsigned long long want = (1ull << (SIGTERM - 1)) | (1ull << (SIGINT - 1));
    return (mask & want) == want;
}

static int list_tasks(char names[][32], int cap)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap)
        if (de->d_name[0] != '.')
            snprintf(names[n++], 32, "%.20s", de->d_name); /* task ids are short */
    closedir(d);
    return n;
}

Test(storage, the_producer_thread_blocks_sigterm_and_sigint)
{
    write_partitions(1, 100);
    struct dataset *ds = open_ds(10, 0, 0);
    char before[64][32], after[64][32];
    int nb = list_tasks(before, 64);
    struct prefetch *pf = start(ds, 2, NULL);
    int na = list_tasks(after, 64), fresh = 0;
    for (int i = 0; i < na; i++) {
        int old = 0;
        for (int j = 0; j < nb; j++)
            old |= strcmp(after[i], before[j]) == 0;
        if (old)
            continue;
        fresh++;
        cr_assert_eq(blocked_in(after[i]), 1, "thread %s does not block SIGTERM and SIGINT", after[i]);
    }
    cr_assert_geq(fresh, 1, "no producer thread found");
    prefetch_stop(pf);
    dataset_close(ds);
}
