/*
 * fuzz_shards.c — kaen's shard metadata (storage/shards.c): .meta/shards/ CSV files with a
 * header naming id and count, whose counts become the row counts the CSV parser is held to.
 * The input is the files' bytes, split into two files at the first NUL byte, each in a buffer
 * of exactly its size. Invariants: ids come out strictly ascending, no more of them than
 * lines, and store_shards_lookup finds each with its count; a partition name's id is the
 * digits after "part-".
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "shards.h"

static void check_partition_id(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    char *name = strndup((const char *)data, nl ? (size_t)(nl - data) : size);
    uint64_t id;
    if (store_shards_partition_id(name, &id))
        FUZZ_CHECK(strncmp(name, "part-", 5) == 0 && isdigit((unsigned char)name[5]) &&
                       strtoull(name + 5, NULL, 10) == id,
                   "'%s' gives id %llu", name, (unsigned long long)id);
    free(name);
}

/* The file's bytes in a buffer of their own, so that reading past them is seen. */
static int add_file(struct store_shards *s, const char *name, const char *text, size_t n, struct err *e)
{
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    int rc = store_shards_add_file(s, name, copy, n, e);
    free(copy);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_partition_id(data, size);
    const char *text = (const char *)data;
    const char *cut = memchr(text, '\0', size);
    size_t first = cut ? (size_t)(cut - text) : size;
    size_t lines = 2;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';

    struct store_shards s = {0};
    struct err e = {0};
    int rc = add_file(&s, "a.csv", text, first, &e);
    if (rc == ERR_OK && cut)
        rc = add_file(&s, "b.csv", cut + 1, size - first - 1, &e);
    if (rc == ERR_OK)
        rc = store_shards_finish(&s, &e);
    if (rc == ERR_OK) {
        FUZZ_CHECK(s.n <= lines, "%zu ids from %zu lines", s.n, lines);
        for (size_t i = 0; i < s.n; i++) {
            uint64_t c;
            FUZZ_CHECK(i == 0 || s.id[i - 1] < s.id[i], "ids not strictly ascending at %zu", i);
            FUZZ_CHECK(store_shards_lookup(&s, s.id[i], &c) && c == s.count[i], "id %llu not found",
                       (unsigned long long)s.id[i]);
        }
    }
    store_shards_free(&s);
    return 0;
}
