/* mpsc.c — Dmitry Vyukov's intrusive MPSC queue: one atomic exchange per push. */
#include "mpsc.h"

#include <stddef.h>

void mpsc_init(struct mpsc *q)
{
    atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
    q->head = &q->stub;
    atomic_store_explicit(&q->tail, &q->stub, memory_order_relaxed);
}

void mpsc_push(struct mpsc *q, struct mpsc_node *n)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    struct mpsc_node *prev = atomic_exchange_explicit(&q->tail, n, memory_order_acq_rel);
    /* Between the exchange and this store the chain is briefly broken; pop copes. */
    atomic_store_explicit(&prev->next, n, memory_order_release);
}

struct mpsc_node *mpsc_pop(struct mpsc *q)
{
    struct mpsc_node *head = q->head;
    struct mpsc_node *next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (head == &q->stub) {
        if (!next)
            return NULL;
        q->head = next;
        head = next;
        next = atomic_load_explicit(&next->next, memory_order_acquire);
    }
    if (next) {
        q->head = next;
        return head;
    }
    if (head != atomic_load_explicit(&q->tail, memory_order_acquire))
        return NULL; /* a producer is mid-push */
    /* head is the last node: put the stub behind it so head can be handed out. */
    mpsc_push(q, &q->stub);
    next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (next) {
        q->head = next;
        return head;
    }
    return NULL;
}
