/* parquet_meta.c — the footer (magic, length, FileMetaData) and page headers, decoded from Thrift's compact protocol. */
#include "parquet_meta.h"

#include <stdlib.h>
#include <string.h>

#include "thrift.h"

#define MAGIC "PAR1"
#define TAIL 8 /* footer length (4, little-endian) + magic */

/* Field ids of parquet.thrift. */
enum { FMD_SCHEMA = 2, FMD_NUM_ROWS = 3, FMD_ROW_GROUPS = 4 };
enum { SE_TYPE = 1, SE_TYPE_LENGTH = 2, SE_REPETITION = 3, SE_NAME = 4, SE_NUM_CHILDREN = 5, SE_CONVERTED = 6, SE_SCALE = 7, SE_LOGICAL = 10 };
enum { CONVERTED_DECIMAL = 5, CONVERTED_TIMESTAMP_MILLIS = 9, CONVERTED_TIMESTAMP_MICROS = 10 };
enum { LOGICAL_DECIMAL = 5, LOGICAL_TIMESTAMP = 8 };
enum { RG_COLUMNS = 1, RG_NUM_ROWS = 3 };
enum { CC_FILE_PATH = 1, CC_META = 3 };
enum {
    CM_TYPE = 1, CM_CODEC = 4, CM_NUM_VALUES = 5, CM_COMPRESSED = 7, CM_DATA_PAGE = 9, CM_DICT_PAGE = 11,
};
enum { PH_TYPE = 1, PH_USIZE = 2, PH_CSIZE = 3, PH_DATA = 5, PH_DICT = 7, PH_DATA_V2 = 8 };

/* A struct's fields, one at a time: for (FIELDS(t)) switch (id) {...}. */
#define FIELDS(t, last, id, type) \
    int16_t last, id;             \
    int type;                     \
    if (thrift_struct_begin(t, &last)) for (; thrift_field(t, &last, &id, &type) || (thrift_struct_end(t), 0);)

struct schema_elem {
    int32_t type, type_length, repetition, num_children;
    int32_t converted, scale;  /* converted_type (-1: none) and its DECIMAL scale */
    int32_t logical_scale;     /* from logicalType: DECIMAL's scale or a TIMESTAMP's unit digits; -1: none */
    bool logical_decimal;
    const unsigned char *name;
    size_t name_len;
};

/* TimeUnit, a union of empty structs: MILLIS (1), MICROS (2), NANOS (3) as digits after the second. */
static void read_time_unit(struct thrift_in *t, int32_t *digits)
{
    FIELDS(t, last, id, type)
    {
        if (id >= 1 && id <= 3 && type == THRIFT_STRUCT)
            *digits = 3 * id;
        thrift_skip(t, type);
    }
}

/* The one field of a LogicalType union this reader uses: DecimalType's scale, TimestampType's unit. */
static void read_logical(struct thrift_in *t, struct schema_elem *s)
{
    FIELDS(t, last, id, type)
    {
        if ((id != LOGICAL_DECIMAL && id != LOGICAL_TIMESTAMP) || type != THRIFT_STRUCT) {
            thrift_skip(t, type);
            continue;
        }
        s->logical_scale = 0;
        s->logical_decimal = id == LOGICAL_DECIMAL;
        FIELDS(t, ilast, iid, itype)
        {
            if (id == LOGICAL_DECIMAL && iid == 1)
                thrift_i32(t, itype, &s->logical_scale);
            else if (id == LOGICAL_TIMESTAMP && iid == 2 && itype == THRIFT_STRUCT)
                read_time_unit(t, &s->logical_scale);
            else
                thrift_skip(t, itype);
        }
    }
}

static void read_schema_elem(struct thrift_in *t, struct schema_elem *s)
{
    *s = (struct schema_elem){.type = -1, .repetition = PQ_REQUIRED, .converted = -1, .logical_scale = -1};
    FIELDS(t, last, id, type)
    {
        switch (id) {
        case SE_TYPE: thrift_i32(t, type, &s->type); break;
        case SE_TYPE_LENGTH: thrift_i32(t, type, &s->type_length); break;
        case SE_REPETITION: thrift_i32(t, type, &s->repetition); break;
        case SE_NAME: thrift_binary(t, type, &s->name, &s->name_len); break;
        case SE_NUM_CHILDREN: thrift_i32(t, type, &s->num_children); break;
        case SE_CONVERTED: thrift_i32(t, type, &s->converted); break;
        case SE_SCALE: thrift_i32(t, type, &s->scale); break;
        case SE_LOGICAL:
            if (type == THRIFT_STRUCT)
                read_logical(t, s);
            else
                thrift_skip(t, type);
            break;
        default: thrift_skip(t, type);
        }
    }
}

/* Digits after the point of an integer column's values: the logical type's, else the converted type's. */
static int32_t column_scale(const struct schema_elem *s)
{
    if (s->type != PQ_INT32 && s->type != PQ_INT64 && s->type != PQ_FIXED_LEN_BYTE_ARRAY)
        return 0;
    if (s->logical_scale >= 0)
        return s->logical_scale;
    switch (s->converted) {
    case CONVERTED_DECIMAL: return s->scale;
    case CONVERTED_TIMESTAMP_MILLIS: return 3;
    case CONVERTED_TIMESTAMP_MICROS: return 6;
    default: return 0;
    }
}

static void read_column_meta(struct thrift_in *t, struct pq_chunk *c)
{
    int32_t v;
    FIELDS(t, last, id, type)
    {
        switch (id) {
        case CM_TYPE: thrift_i32(t, type, &c->type); break;
        case CM_CODEC:
            if (thrift_i32(t, type, &v))
                c->codec = v;
            break;
        case CM_NUM_VALUES: thrift_i64(t, type, &c->num_values); break;
        case CM_COMPRESSED: thrift_i64(t, type, &c->total_compressed_size); break;
        case CM_DATA_PAGE: thrift_i64(t, type, &c->data_page_offset); break;
        case CM_DICT_PAGE: thrift_i64(t, type, &c->dictionary_page_offset); break;
        default: thrift_skip(t, type);
        }
    }
    c->has_meta = true;
}

static void read_chunk(struct thrift_in *t, struct pq_chunk *c)
{
    *c = (struct pq_chunk){.type = -1, .dictionary_page_offset = -1, .data_page_offset = -1};
    FIELDS(t, last, id, type)
    {
        if (id == CC_FILE_PATH && type == THRIFT_BINARY)
            c->external = true;
        if (id == CC_META && type == THRIFT_STRUCT)
            read_column_meta(t, c);
        else
            thrift_skip(t, type);
    }
}

/* A list of structs: its length and zeroed room for its elements (NULL when empty); false when bad. */
static bool struct_list(struct thrift_in *t, int type, size_t elem_size, void **room, size_t *n)
{
    int elem;
    *room = NULL;
    if (!thrift_list(t, type, &elem, n))
        return false;
    if (*n == 0)
        return true;
    if (elem != THRIFT_STRUCT)
        t->why = "a list of structs holds something else";
    else if (!(*room = calloc(*n, elem_size)))
        t->why = "out of memory";
    t->bad = !*room;
    return *room != NULL;
}

static void read_row_group(struct thrift_in *t, struct pq_row_group *g)
{
    *g = (struct pq_row_group){.num_rows = -1};
    FIELDS(t, last, id, type)
    {
        if (id == RG_NUM_ROWS) {
            thrift_i64(t, type, &g->num_rows);
        } else if (id == RG_COLUMNS && !g->chunks) {
            if (!struct_list(t, type, sizeof *g->chunks, (void **)&g->chunks, &g->n_chunks))
                continue;
            for (size_t i = 0; i < g->n_chunks && !t->bad; i++)
                read_chunk(t, &g->chunks[i]);
        } else {
            thrift_skip(t, type);
        }
    }
}

/* Keeps the root's children as the columns: a flat schema of leaves only. */
static int flatten_schema(const char *name, const struct schema_elem *s, size_t n, struct pq_file *f,
                          struct err *e)
{
    if (n == 0)
        return err_set(e, ERR_INVALID_DATA, "%s: parquet schema is empty", name);
    for (size_t i = 1; i < n; i++) /* a name is required by parquet.thrift; messages and lookups need one */
        if (!s[i].name)
            return err_set(e, ERR_INVALID_DATA, "%s: parquet schema: element %zu has no name", name, i);
    if (s[0].num_children < 0 || (size_t)s[0].num_children != n - 1) {
        for (size_t i = 1; i < n; i++)
            if (s[i].num_children > 0)
                return err_set(e, ERR_INVALID_DATA, "%s: column %.*s: nested columns are not supported", name,
                               (int)s[i].name_len, (const char *)s[i].name);
        return err_set(e, ERR_INVALID_DATA, "%s: parquet schema: the root has %d children, %zu elements follow",
                       name, s[0].num_children, n - 1);
    }
    if (n > 1 && !(f->cols = calloc(n - 1, sizeof *f->cols)))
        return err_set(e, ERR_NOMEM, "%s: out of memory for the schema", name);
    f->n_cols = n - 1;
    for (size_t i = 1; i < n; i++) {
        const struct schema_elem *c = &s[i];
        if (c->num_children > 0 || c->type < 0)
            return err_set(e, ERR_INVALID_DATA, "%s: column %.*s: nested columns are not supported", name,
                           (int)c->name_len, (const char *)c->name);
        if (c->repetition == PQ_REPEATED)
            return err_set(e, ERR_INVALID_DATA, "%s: column %.*s: repeated columns are not supported", name,
                           (int)c->name_len, (const char *)c->name);
        if (c->repetition != PQ_REQUIRED && c->repetition != PQ_OPTIONAL)
            return err_set(e, ERR_INVALID_DATA, "%s: column %.*s: unknown repetition %d", name,
                           (int)c->name_len, (const char *)c->name, c->repetition);
        int32_t scale = column_scale(c);
        if (scale < 0 || scale > 38)
            return err_set(e, ERR_INVALID_DATA, "%s: column %.*s: scale %d", name, (int)c->name_len,
                           (const char *)c->name, scale);
        bool decimal = c->logical_decimal || (c->logical_scale < 0 && c->converted == CONVERTED_DECIMAL);
        if (c->type == PQ_FIXED_LEN_BYTE_ARRAY && (c->type_length < 1 || c->type_length > 16))
            return err_set(e, ERR_INVALID_DATA, "%s: column %.*s: fixed length of %d bytes", name, (int)c->name_len,
                           (const char *)c->name, c->type_length);
        f->cols[i - 1] = (struct pq_column){(const char *)c->name, c->name_len, c->type, c->repetition, scale,
                                            c->type_length, decimal};
    }
    return ERR_OK;
}

/* The schema list: read whole (it may come before or after the row groups), flattened once read. */
static void read_schema(struct thrift_in *t, int type, struct schema_elem **out, size_t *n)
{
    if (!struct_list(t, type, sizeof **out, (void **)out, n))
        return;
    for (size_t i = 0; i < *n && !t->bad; i++)
        read_schema_elem(t, &(*out)[i]);
}

static void read_file_meta(struct thrift_in *t, struct pq_file *f, struct schema_elem **schema, size_t *n_schema)
{
    f->num_rows = -1;
    FIELDS(t, last, id, type)
    {
        if (id == FMD_SCHEMA && !*schema) {
            read_schema(t, type, schema, n_schema);
        } else if (id == FMD_NUM_ROWS) {
            thrift_i64(t, type, &f->num_rows);
        } else if (id == FMD_ROW_GROUPS && !f->groups) {
            if (!struct_list(t, type, sizeof *f->groups, (void **)&f->groups, &f->n_groups))
                continue;
            for (size_t i = 0; i < f->n_groups && !t->bad; i++)
                read_row_group(t, &f->groups[i]);
        } else {
            thrift_skip(t, type);
        }
    }
}

int64_t pq_chunk_start(const struct pq_chunk *k)
{
    /* Some writers put 0 here for "none": only an offset before the first data page is a dictionary's. */
    if (k->dictionary_page_offset > 0 && k->dictionary_page_offset < k->data_page_offset)
        return k->dictionary_page_offset;
    return k->data_page_offset;
}

void pq_file_free(struct pq_file *f)
{
    for (size_t i = 0; f->groups && i < f->n_groups; i++)
        free(f->groups[i].chunks);
    free(f->groups);
    free(f->cols);
    *f = (struct pq_file){0};
}

/* What the row groups say must agree with the schema and the file's size. */
static int check_groups(const char *name, const struct pq_file *f, size_t len, struct err *e)
{
    int64_t total = 0;
    for (size_t g = 0; g < f->n_groups; g++) {
        const struct pq_row_group *rg = &f->groups[g];
        if (rg->num_rows < 0 || rg->num_rows > INT64_MAX - total)
            return err_set(e, ERR_INVALID_DATA, "%s: row group %zu: bad row count", name, g);
        total += rg->num_rows;
        if (rg->n_chunks != f->n_cols)
            return err_set(e, ERR_INVALID_DATA, "%s: row group %zu: %zu column chunks for %zu columns", name, g,
                           rg->n_chunks, f->n_cols);
        for (size_t c = 0; c < rg->n_chunks; c++) {
            const struct pq_chunk *k = &rg->chunks[c];
            const struct pq_column *col = &f->cols[c];
            int64_t start = pq_chunk_start(k);
            if (k->external || !k->has_meta)
                return err_set(e, ERR_INVALID_DATA, "%s: column %.*s, row group %zu: the chunk is in another file",
                               name, (int)col->name_len, col->name, g);
            if (k->type != col->type)
                return err_set(e, ERR_INVALID_DATA, "%s: column %.*s, row group %zu: chunk type %d, schema type %d",
                               name, (int)col->name_len, col->name, g, k->type, col->type);
            if (start < 4 || k->total_compressed_size < 0 || k->num_values < 0 ||
                (uint64_t)start > len - TAIL || (uint64_t)k->total_compressed_size > len - TAIL - (uint64_t)start)
                return err_set(e, ERR_INVALID_DATA, "%s: column %.*s, row group %zu: pages outside the file", name,
                               (int)col->name_len, col->name, g);
        }
    }
    if (f->num_rows != total)
        return err_set(e, ERR_INVALID_DATA, "%s: %lld rows in the footer, %lld in its row groups", name,
                       (long long)f->num_rows, (long long)total);
    return ERR_OK;
}

int pq_footer_len(const char *name, const unsigned char *last8, uint64_t file_size, size_t *footer_len,
                  struct err *e)
{
    if (file_size < 4 + TAIL)
        return err_set(e, ERR_INVALID_DATA, "%s: %llu bytes: too short for a Parquet file", name,
                       (unsigned long long)file_size);
    if (memcmp(last8 + 4, MAGIC, 4) != 0)
        return err_set(e, ERR_INVALID_DATA, "%s: not a Parquet file (no PAR1 magic at its end)", name);
    uint32_t meta_len = (uint32_t)last8[0] | (uint32_t)last8[1] << 8 | (uint32_t)last8[2] << 16 |
                        (uint32_t)last8[3] << 24;
    if (meta_len > file_size - 4 - TAIL)
        return err_set(e, ERR_INVALID_DATA, "%s: footer of %u bytes in a file of %llu", name, meta_len,
                       (unsigned long long)file_size);
    if (meta_len > PQ_FOOTER_MAX)
        return err_set(e, ERR_INVALID_DATA, "%s: footer of %u bytes, more than the %u traind reads", name, meta_len,
                       (unsigned)PQ_FOOTER_MAX);
    *footer_len = (size_t)meta_len + TAIL;
    return ERR_OK;
}

int pq_footer_read(const char *name, const unsigned char *footer, size_t footer_len, uint64_t file_size,
                   struct pq_file *f, struct err *e)
{
    *f = (struct pq_file){0};
    size_t want;
    int rc = footer_len < TAIL ? err_set(e, ERR_INVALID_DATA, "%s: a footer of %zu bytes", name, footer_len)
                               : pq_footer_len(name, footer + footer_len - TAIL, file_size, &want, e);
    if (rc)
        return rc;
    if (want != footer_len)
        return err_set(e, ERR_INVALID_DATA, "%s: a footer of %zu bytes, its length says %zu", name, footer_len, want);
    struct thrift_in t = {.p = footer, .end = footer + footer_len - TAIL};
    struct schema_elem *schema = NULL;
    size_t n_schema = 0;
    read_file_meta(&t, f, &schema, &n_schema);
    if (t.bad)
        rc = err_set(e, ERR_INVALID_DATA, "%s: parquet footer: %s", name, t.why);
    else if (!schema)
        rc = err_set(e, ERR_INVALID_DATA, "%s: parquet footer has no schema", name);
    else if ((rc = flatten_schema(name, schema, n_schema, f, e)) == ERR_OK)
        rc = check_groups(name, f, file_size - footer_len + TAIL, e);
    free(schema);
    if (rc)
        pq_file_free(f);
    return rc;
}

int pq_file_read(const char *name, const unsigned char *buf, size_t len, struct pq_file *f, struct err *e)
{
    *f = (struct pq_file){0};
    if (len < 4 + TAIL)
        return err_set(e, ERR_INVALID_DATA, "%s: %zu bytes: too short for a Parquet file", name, len);
    if (memcmp(buf, MAGIC, 4) != 0 || memcmp(buf + len - 4, MAGIC, 4) != 0)
        return err_set(e, ERR_INVALID_DATA, "%s: not a Parquet file (no PAR1 magic at both ends)", name);
    size_t footer_len;
    int rc = pq_footer_len(name, buf + len - TAIL, len, &footer_len, e);
    return rc ? rc : pq_footer_read(name, buf + len - footer_len, footer_len, len, f, e);
}

/* DataPageHeader, or DictionaryPageHeader: the same first two fields; the dictionary's third is is_sorted. */
static void read_data_header(struct thrift_in *t, struct pq_page *pg, bool dict)
{
    FIELDS(t, last, id, type)
    {
        if (id == 1)
            thrift_i32(t, type, &pg->num_values);
        else if (id == 2)
            thrift_i32(t, type, &pg->encoding);
        else if (id == 3 && !dict)
            thrift_i32(t, type, &pg->def_encoding);
        else
            thrift_skip(t, type);
    }
}

static void read_data_v2_header(struct thrift_in *t, struct pq_page *pg)
{
    FIELDS(t, last, id, type)
    {
        switch (id) {
        case 1: thrift_i32(t, type, &pg->num_values); break;
        case 2: thrift_i32(t, type, &pg->num_nulls); break;
        case 4: thrift_i32(t, type, &pg->encoding); break;
        case 5: thrift_i32(t, type, &pg->def_bytes); break;
        case 6: thrift_i32(t, type, &pg->rep_bytes); break;
        case 7: thrift_bool(t, type, &pg->v2_compressed); break;
        default: thrift_skip(t, type);
        }
    }
}

bool pq_page_read(const unsigned char *p, const unsigned char *end, struct pq_page *pg, size_t *hdr_len,
                  const char **why)
{
    *pg = (struct pq_page){.type = -1, .num_values = -1, .encoding = -1, .def_encoding = PQ_RLE,
                           .uncompressed_size = -1, .compressed_size = -1, .v2_compressed = true};
    struct thrift_in t = {.p = p, .end = end};
    bool seen = false;
    FIELDS(&t, last, id, type)
    {
        switch (id) {
        case PH_TYPE: thrift_i32(&t, type, &pg->type); break;
        case PH_USIZE: thrift_i32(&t, type, &pg->uncompressed_size); break;
        case PH_CSIZE: thrift_i32(&t, type, &pg->compressed_size); break;
        case PH_DATA:
        case PH_DICT:
        case PH_DATA_V2:
            if (type != THRIFT_STRUCT || seen) {
                thrift_skip(&t, type);
                break;
            }
            seen = true;
            if (id == PH_DATA || id == PH_DICT)
                read_data_header(&t, pg, id == PH_DICT);
            else
                read_data_v2_header(&t, pg);
            break;
        default: thrift_skip(&t, type);
        }
    }
    if (t.bad) {
        *why = t.why;
        return false;
    }
    if (pg->uncompressed_size < 0 || pg->compressed_size < 0) {
        *why = "a page header without its sizes";
        return false;
    }
    *hdr_len = (size_t)(t.p - p);
    return true;
}
