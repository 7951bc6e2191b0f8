/* pool.c — worker threads for the API behind one mutex, and a uv_async doorbell back to the loop. */
#include "pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "thread.h"

struct api_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;                /* todo gained an item, or the pool is closing */
    struct api_pool_item *todo, **todo_end;   /* submission order */
    struct api_pool_item *finished;   /* run, done not called yet */
    bool closing;
    pthread_t *threads;
    int n_threads;
    uv_async_t doorbell;
    bool doorbell_open;
};

static void *pool_main(void *arg)
{
    struct api_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->todo && !p->closing)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->closing)
            break;
        struct api_pool_item *it = p->todo;
        p->todo = it->next;
        if (!p->todo)
            p->todo_end = &p->todo;
        pthread_mutex_unlock(&p->mu);
        it->run(it);
        pthread_mutex_lock(&p->mu);
        it->next = p->finished;
        p->finished = it;
        /* uv_async_send is safe from any thread and coalesces: on_doorbell takes the whole list. */
        uv_async_send(&p->doorbell);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The finished items, oldest first. */
static struct api_pool_item *take_finished(struct api_pool *p)
{
    pthread_mutex_lock(&p->mu);
    struct api_pool_item *list = p->finished, *rev = NULL;
    p->finished = NULL;
    pthread_mutex_unlock(&p->mu);
    while (list) {
        struct api_pool_item *next = list->next;
        list->next = rev;
        rev = list;
        list = next;
    }
    return rev;
}

static void deliver(struct api_pool *p)
{
    for (struct api_pool_item *it = take_finished(p), *next; it; it = next) {
        next = it->next;
        it->done(it, true);
    }
}

static void on_doorbell(uv_async_t *h)
{
    deliver(h->data);
}

int api_pool_start(uv_loop_t *loop, int threads, struct api_pool **out, struct err *e)
{
    *out = NULL;
    struct api_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->threads = calloc((size_t)threads, sizeof *p->threads))) {
        free(p);
        return err_set(e, ERR_NOMEM, "http: out of memory");
    }
    p->todo_end = &p->todo;
    int rc = pthread_mutex_init(&p->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&p->cv, NULL)) != 0)
        pthread_mutex_destroy(&p->mu);
    if (rc) {
        free(p->threads);
        free(p);
        return err_set(e, ERR_INTERNAL, "%s:%d: http pool: %s", __FILE__, __LINE__, strerror(rc));
    }
    *out = p;
    if ((rc = uv_async_init(loop, &p->doorbell, on_doorbell)) != 0) {
        api_pool_close(p);
        return err_set(e, ERR_INTERNAL, "http pool: uv_async_init: %s", uv_strerror(rc));
    }
    p->doorbell_open = true;
    p->doorbell.data = p;
    for (; p->n_threads < threads; p->n_threads++)
        if ((rc = thread_start(&p->threads[p->n_threads], pool_main, p)) != 0)
            break;
    if (rc) {
        api_pool_close(p);
        return err_set(e, ERR_INTERNAL, "%s:%d: http pool threads: %s", __FILE__, __LINE__, strerror(rc));
    }
    return 0;
}

void api_pool_submit(struct api_pool *p, struct api_pool_item *it)
{
    it->next = NULL;
    pthread_mutex_lock(&p->mu);
    *p->todo_end = it;
    p->todo_end = &it->next;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void api_pool_close(struct api_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->closing = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    p->n_threads = 0;
    deliver(p);
    struct api_pool_item *it = p->todo;
    p->todo = NULL;
    p->todo_end = &p->todo;
    for (struct api_pool_item *next; it; it = next) {
        next = it->next;
        it->done(it, false);
    }
    if (p->doorbell_open) {
        uv_close((uv_handle_t *)&p->doorbell, NULL);
        p->doorbell_open = false;
    }
}

void api_pool_free(struct api_pool *p)
{
    if (!p)
        return;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}
