/* shards.h — kaen's shard metadata (.meta/shards, header id,count): partition row counts without reading them. */
#ifndef TRAIND_STORAGE_SHARDS_H
#define TRAIND_STORAGE_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "store.h"

struct store_shards {
    uint64_t *id;     /* sorted ascending */
    uint64_t *count;
    size_t n;
};

/* Reads every file the glob matches; rows in any order, files in any order; a repeated id must agree. */
int store_shards_load(const char *url, const struct store_access *acc, struct store_shards *out,
                      struct err *e);
void store_shards_free(struct store_shards *s);

/* The id in a partition name "part-<digits>..." (part-00077.csv, part-00077-<uuid>-c000.csv). */
bool store_shards_partition_id(const char *name, uint64_t *id);

bool store_shards_lookup(const struct store_shards *s, uint64_t id, uint64_t *count);

#endif
