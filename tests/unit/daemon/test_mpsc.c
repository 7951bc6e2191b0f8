/* test_mpsc.c — the MPSC queue: FIFO, nothing lost under several producers, order kept per producer. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "mpsc.h"

struct item {
    struct mpsc_node node;   /* first, so a node pointer is an item pointer */
    int producer;
    int seq;
};

Test(mpsc, empty_queue_pops_null)
{
    struct mpsc q;
    mpsc_init(&q);
    cr_expect_null(mpsc_pop(&q));
}

Test(mpsc, single_thread_is_fifo)
{
    struct mpsc q;
    mpsc_init(&q);
    struct item it[5];
    for (int i = 0; i < 5; i++) {
        it[i].seq = i;
        mpsc_push(&q, &it[i].node);
    }
    for (int i = 0; i < 5; i++) {
        struct item *x = (struct item *)mpsc_pop(&q);
        cr_assert_not_null(x, "item %d missing", i);
        cr_expect_eq(x->seq, i);
    }
    cr_expect_null(mpsc_pop(&q));
}

Test(mpsc, queue_is_reusable_after_draining)
{
    struct mpsc q;
    mpsc_init(&q);
    struct item a = {.seq = 1}, b = {.seq = 2};
    mpsc_push(&q, &a.node);
    cr_assert_eq(mpsc_pop(&q), &a.node);
    cr_assert_null(mpsc_pop(&q));
    mpsc_push(&q, &b.node);
    cr_assert_eq(mpsc_pop(&q), &b.node);
    cr_assert_null(mpsc_pop(&q));
}

#define PRODUCERS 4
#define PER_PRODUCER 50000

struct producer {
    struct mpsc *q;
    struct item *items;
    int id;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        p->items[i].producer = p->id;
        p->items[i].seq = i;
        mpsc_push(p->q, &p->items[i].node);
    }
    return NULL;
}

Test(mpsc, concurrent_producers_lose_nothing_and_keep_their_order)
{
    struct mpsc q;
    mpsc_init(&q);
    struct producer prod[PRODUCERS];
    pthread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        prod[p] = (struct producer){.q = &q, .items = calloc(PER_PRODUCER, sizeof(struct item)), .id = p};
        cr_assert_not_null(prod[p].items);
        cr_assert_eq(pthread_create(&th[p], NULL, produce, &prod[p]), 0);
    }
    /* Consume while the producers run, as the loop thread does. */
    int next[PRODUCERS] = {0};
    long total = 0;
    while (total < (long)PRODUCERS * PER_PRODUCER) {
        struct item *x = (struct item *)mpsc_pop(&q);
        if (!x)
            continue;
        cr_assert_eq(x->seq, next[x->producer], "producer %d: got %d, expected %d", x->producer,
                     x->seq, next[x->producer]);
        next[x->producer]++;
        total++;
    }
    for (int p = 0; p < PRODUCERS; p++) {
        cr_assert_eq(pthread_join(th[p], NULL), 0);
        cr_expect_eq(next[p], PER_PRODUCER);
    }
    cr_expect_null(mpsc_pop(&q));
    for (int p = 0; p < PRODUCERS; p++)
        free(prod[p].items);
}
