/* dataset_flat.c — an unshuffled dataset resident in one buffer, so its batches are views rather than copies. */
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "hugemem.h"

/*
 * Once every partition of an unshuffled dataset is resident (its first epoch read them
 * all), their rows move into one buffer in epoch order, where each batch is a run of
 * rows. The second copy must fit the resident limit beside the first while it is made;
 * then the first is given back (maps of the parsed cache unmapped, parsed rows freed),
 * so what stays resident is the same number of bytes. Without the memory it stays as it
 * was: batches are copied, as before.
 */
void dataset_flatten(struct dataset *ds)
{
    if (ds->flat || ds->buf_cap || ds->shuffle_partitions)
        return;
    size_t total = 0;
    for (size_t i = 0; i < ds->n; i++) {
        const struct part *p = &ds->parts[i];
        if (!p->known || (p->rows && !p->data))
            return; /* not all resident (yet) */
        total += (size_t)p->rows * ds->stride;
    }
    if (total == 0 || total > ds->resident_limit - ds->resident_bytes || !(ds->flat = hugemem_alloc(total)))
        return;
    size_t at = 0;
    for (size_t i = 0; i < ds->n; i++) {
        struct part *p = &ds->parts[i];
        if (!p->rows)
            continue;
        size_t bytes = (size_t)p->rows * ds->stride;
        memcpy(ds->flat + at, p->data, bytes);
        dataset_rows_free(NULL, p->data, &p->map);
        p->map = (struct pcache_map){0};
        p->data = ds->flat + at;
        at += bytes;
    }
}

int dataset_next_view(struct dataset *ds, const void **view, size_t *rows, struct dataset_cursor *at,
                      struct err *e)
{
    *view = NULL;
    if (ds->batch == 0 && ds->epoch > 0)
        dataset_flatten(ds);
    if (!ds->flat)
        return ERR_OK;
    const char *v = NULL;
    int rc = dataset_take_batch(ds, NULL, &v, rows, at, e);
    if (rc == ERR_OK)
        *view = v;
    return rc;
}
