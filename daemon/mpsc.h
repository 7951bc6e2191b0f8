/* mpsc.h — an intrusive multi-producer single-consumer queue (Vyukov), lock-free on push. */
#ifndef TRAIND_DAEMON_MPSC_H
#define TRAIND_DAEMON_MPSC_H

#include <stdatomic.h>

/* Embed one in whatever travels through the queue; recover it with container_of-style casts. */
struct mpsc_node {
    _Atomic(struct mpsc_node *) next;
};

struct mpsc {
    _Atomic(struct mpsc_node *) tail;   /* producers swap themselves in here */
    struct mpsc_node *head;             /* the consumer's end */
    struct mpsc_node stub;
};

void mpsc_init(struct mpsc *q);

/* Any thread. Never blocks, never fails. */
void mpsc_push(struct mpsc *q, struct mpsc_node *n);

/*
 * Consumer thread only. Returns the oldest node, or NULL when the queue is empty
 * or a producer is half-way through a push; that producer rings its doorbell
 * after the push completes, so the consumer is called again and sees it then.
 */
struct mpsc_node *mpsc_pop(struct mpsc *q);

#endif
