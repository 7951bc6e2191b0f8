/* dataset_flat.c — an unshuffled dataset resident in one buffer, so its batches are views rather than copies. */
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "hugemem.h"

/*
 * Once every partition's row count of an unshuffled dataset is known (kaen's shards
 * metadata tells them at open; else reading counts them), one buffer for all its rows
 * is made, in epoch order, so that each batch is a run of rows. Partitions already in
 * memory move there now (the parsed cache's maps unmapped, parsed rows freed); each
 * other one moves there when it is first read (dataset_place), so a dataset with
 * shards metadata has views from its first batch and copies each row once. The buffer
 * must fit the resident limit beside what is resident while the rows move; without the
 * memory the dataset stays as it was and its batches are copied.
 */
void dataset_flatten(struct dataset *ds)
{
    if (ds->flat || ds->buf_cap || ds->shuffle_partitions || ds->share_n)
        return; /* a replica's share holds some partitions only: each one's own rows */
    size_t total = 0;
    for (size_t i = 0; i < ds->n; i++) {
        const struct part *p = &ds->parts[i];
        if (!p->known)
            return; /* not all counted (yet) */
        total += (size_t)p->rows * ds->stride;
    }
    if (total == 0 || total > ds->resident_limit - ds->resident_bytes || !(ds->flat = hugemem_alloc(total)))
        return;
    ds->flat_bytes = total;
    size_t at = 0;
    for (size_t i = 0; i < ds->n; i++) {
        struct part *p = &ds->parts[i];
        p->flat_at = at;
        at += (size_t)p->rows * ds->stride;
        if (p->data) {
            void *rows = p->data;
            ds->resident_bytes -= (size_t)p->rows * ds->stride; /* counted again in its new place */
            dataset_place(ds, i, &rows, &p->map);
        } else if (ds->scratch && ds->scratch_part == i) {
            dataset_place(ds, i, &ds->scratch, &ds->scratch_map);
            ds->scratch = NULL;
            ds->scratch_part = NO_PART;
        }
    }
}

void dataset_place(struct dataset *ds, size_t i, void **rows, struct pcache_map *map)
{
    struct part *p = &ds->parts[i];
    size_t bytes = (size_t)p->rows * ds->stride;
    if (*rows != ds->flat + p->flat_at) { /* else read there from the parsed cache (pcache_load's into) */
        memcpy(ds->flat + p->flat_at, *rows, bytes);
        dataset_rows_free(&ds->bin, *rows, map);
    }
    *map = (struct pcache_map){0};
    p->map = (struct pcache_map){0};
    *rows = p->data = ds->flat + p->flat_at;
    ds->resident_bytes += bytes;
    if (ds->resident_bytes == ds->flat_bytes)
        rows_bin_trim(&ds->bin); /* nothing is parsed any more: the spare row memory goes */
}

int dataset_next_view(struct dataset *ds, const void **view, size_t *rows, struct dataset_cursor *at,
                      struct err *e)
{
    *view = NULL;
    dataset_flatten(ds);
    if (!ds->flat)
        return ERR_OK;
    const char *v = NULL;
    int rc = dataset_take_batch(ds, NULL, &v, rows, at, e);
    if (rc == ERR_OK)
        *view = v;
    return rc;
}
