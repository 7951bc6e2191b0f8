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
    size_t n, cap;
};

/* Reads every file the glob matches; rows in any order, files in any order; a repeated id must agree. */
int store_shards_load(const char *url, const struct store_access *acc, struct store_shards *out,
                      struct err *e);
void store_shards_free(struct store_shards *s);

/* What store_shards_load does with the files' bytes: from a zeroed s, add each file (name is for
   messages), then finish (sorts, and refuses an id given two counts). Free s whatever the result. */
int store_shards_add_file(struct store_shards *s, const char *name, const char *buf, size_t len, struct err *e);
int store_shards_finish(struct store_shards *s, struct err *e);

/* The id in a partition name "part-<digits>..." (part-00077.csv, part-00077-<uuid>-c000.csv). */
bool store_shards_partition_id(const char *name, uint64_t *id);

bool store_shards_lookup(const struct store_shards *s, uint64_t id, uint64_t *count);

#endif
