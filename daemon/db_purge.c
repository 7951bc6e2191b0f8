/* db_purge.c — deleted jobs' history removed on a thread of its own, a few blocks a transaction. */
#include "db_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* Blocks (HIST_BLOCK_ROWS rows each) a transaction deletes: a few milliseconds, so the loop thread's writes wait little. */
#define PURGE_CHUNK 64

struct db_purge {
    sqlite3 *conn;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char (*ids)[17];                   /* jobs whose history goes, oldest first */
    size_t n, cap;
    bool stop;
};

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Deletes all of job_id's blocks, a chunk at a time, until done or told to stop. */
static void purge_job(struct db_purge *p, const char *job_id)
{
    size_t total = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return;
        int deleted = 0;
        struct err e = {0};
        if (hist_purge_chunk(p->conn, job_id, PURGE_CHUNK, &deleted, &e)) {
            log_warn("deleting the history of job %s: %s; tried again at the next start", job_id, e.msg);
            return;
        }
        total += (size_t)deleted;
        if (deleted < PURGE_CHUNK)
            break;
        nap_ms(1);   /* the loop thread's writes go first */
    }
    if (total)
        log_debug("job %s: its history (%zu blocks) is deleted", job_id, total);
}

/* Blocks whose job is gone: a purge a crash or a stop interrupted. */
static void find_orphans(struct db_purge *p)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(p->conn, "SELECT DISTINCT job_id FROM metrics_blocks"
                                    " WHERE job_id NOT IN (SELECT id FROM jobs)", -1, &s, NULL) != SQLITE_OK) {
        log_warn("looking for deleted jobs' history: %s", sqlite3_errmsg(p->conn));
        return;
    }
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(s, 0);
        if (id && strlen(id) == 16)
            db_purge_add(p, id);
    }
    sqlite3_finalize(s);
}

static void *purge_main(void *arg)
{
    struct db_purge *p = arg;
    find_orphans(p);
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->n == 0) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        char id[17];
        memcpy(id, p->ids[0], sizeof id);
        memmove(p->ids, p->ids + 1, (p->n - 1) * sizeof *p->ids);
        p->n--;
        pthread_mutex_unlock(&p->mu);
        purge_job(p, id);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int db_purge_start(const char *path, struct db_purge **out, struct err *e)
{
    struct db_purge *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(e, ERR_NOMEM, "db: out of memory");
    int rc = sqlite3_open_v2(path, &p->conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(p->conn, 5000);
    if (rc != SQLITE_OK) {
        err_set(e, ERR_IO, "cannot open %s for deleting history: %s", path,
                p->conn ? sqlite3_errmsg(p->conn) : sqlite3_errstr(rc));
        sqlite3_close(p->conn);
        free(p);
        return e->code;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if ((rc = pthread_create(&p->thread, NULL, purge_main, p)) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        sqlite3_close(p->conn);
        free(p);
        return err_set(e, ERR_INTERNAL, "db: cannot start the history purge thread: %s", strerror(rc));
    }
    *out = p;
    return 0;
}

void db_purge_add(struct db_purge *p, const char *job_id)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 8;
        char (*v)[17] = realloc(p->ids, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&p->mu);
            log_warn("job %s: out of memory queueing its history's deletion; done at the next start", job_id);
            return;
        }
        p->ids = v;
        p->cap = cap;
    }
    memcpy(p->ids[p->n++], job_id, 17);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void db_purge_stop(struct db_purge *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    int rc = sqlite3_close(p->conn);
    if (rc != SQLITE_OK)
        log_error("sqlite: close (purge): %s", sqlite3_errstr(rc));
    free(p->ids);
    free(p);
}
