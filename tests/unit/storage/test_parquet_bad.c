/* test_parquet_bad.c — small Parquet files written here byte by byte from parquet.thrift and Thrift's compact
   protocol (DuckDB reads the good one to the same values): what the fuzz target (tests/fuzz/fuzz_parquet.c)
   found is invalid_data naming what is wrong, and the good files around it still decode. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "parquet.h"

/* A Thrift compact-protocol writer into a fixed buffer; each struct remembers its last field id. */
struct tw {
    unsigned char b[1024];
    size_t n;
    int16_t last[8];
    int depth;
};

enum { T_TRUE = 1, T_I32 = 5, T_I64 = 6, T_BINARY = 8, T_LIST = 9, T_STRUCT = 12 };

static void put(struct tw *w, unsigned v)
{
    cr_assert_lt(w->n, sizeof w->b);
    w->b[w->n++] = (unsigned char)v;
}

static void varint(struct tw *w, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        put(w, (unsigned)(v & 0x7f) | 0x80);
    put(w, (unsigned)v);
}

static void field(struct tw *w, int16_t id, int type)
{
    int16_t delta = (int16_t)(id - w->last[w->depth]);
    if (delta > 0 && delta <= 15) {
        put(w, (unsigned)delta << 4 | (unsigned)type);
    } else {
        put(w, (unsigned)type);
        varint(w, (uint64_t)((int64_t)id << 1 ^ (int64_t)id >> 63));
    }
    w->last[w->depth] = id;
}

static void int_field(struct tw *w, int16_t id, int type, int64_t v)
{
    field(w, id, type);
    varint(w, (uint64_t)(v << 1 ^ v >> 63)); /* zigzag */
}

static void bin_field(struct tw *w, int16_t id, const char *s)
{
    field(w, id, T_BINARY);
    varint(w, strlen(s));
    for (const char *c = s; *c; c++)
        put(w, (unsigned char)*c);
}

/* A struct: as field id (id > 0), or as a list element (id 0). */
static void begin(struct tw *w, int16_t id)
{
    if (id)
        field(w, id, T_STRUCT);
    w->last[++w->depth] = 0;
}

static void end(struct tw *w)
{
    put(w, 0);
    w->depth--;
}

static void list(struct tw *w, int16_t id, int elem, unsigned n)
{
    field(w, id, T_LIST);
    cr_assert_lt(n, 15);
    put(w, n << 4 | (unsigned)elem);
}

/* One column of INT64 values (REQUIRED, PLAIN, uncompressed) in one data page; knobs for what the fuzzer broke. */
struct file_spec {
    const int64_t *values;
    int n;
    bool nameless;
    int codec;                   /* with body: the chunk's codec, and the page is body (claiming usize bytes) */
    const unsigned char *body;
    size_t body_len;
    int32_t usize;
};

/* The page header and values of spec, then the footer: file bytes into out (a buffer of exactly *len bytes). */
static unsigned char *write_file(const struct file_spec *spec, size_t *len)
{
    struct tw page = {0}, foot = {0};
    const int32_t bytes = spec->body ? (int32_t)spec->body_len : spec->n * 8;
    int_field(&page, 1, T_I32, 0);       /* type: DATA_PAGE */
    int_field(&page, 2, T_I32, spec->body ? spec->usize : bytes); /* uncompressed_page_size */
    int_field(&page, 3, T_I32, bytes);   /* compressed_page_size */
    begin(&page, 5);                     /* data_page_header */
    int_field(&page, 1, T_I32, spec->n); /* num_values */
    int_field(&page, 2, T_I32, 0);       /* encoding: PLAIN */
    int_field(&page, 3, T_I32, 3);       /* definition_level_encoding: RLE */
    int_field(&page, 4, T_I32, 3);       /* repetition_level_encoding: RLE */
    end(&page);
    put(&page, 0);
    for (size_t i = 0; spec->body && i < spec->body_len; i++)
        put(&page, spec->body[i]);
    for (int i = 0; !spec->body && i < spec->n; i++)
        for (int k = 0; k < 8; k++)
            put(&page, (unsigned)((uint64_t)spec->values[i] >> (8 * k)) & 0xff);

    int_field(&foot, 1, T_I32, 1);       /* version */
    list(&foot, 2, T_STRUCT, 2);         /* schema: the root, one leaf */
    begin(&foot, 0);
    bin_field(&foot, 4, "root");
    int_field(&foot, 5, T_I32, 1);       /* num_children */
    end(&foot);
    begin(&foot, 0);
    int_field(&foot, 1, T_I32, 2);       /* type: INT64 */
    int_field(&foot, 3, T_I32, 0);       /* repetition: REQUIRED */
    if (!spec->nameless)
        bin_field(&foot, 4, "x");
    end(&foot);
    int_field(&foot, 3, T_I64, spec->n); /* num_rows */
    list(&foot, 4, T_STRUCT, 1);         /* row_groups */
    begin(&foot, 0);
    list(&foot, 1, T_STRUCT, 1);         /* columns */
    begin(&foot, 0);
    int_field(&foot, 2, T_I64, 4);       /* file_offset */
    begin(&foot, 3);                     /* meta_data */
    int_field(&foot, 1, T_I32, 2);       /* type */
    list(&foot, 2, T_I32, 1);            /* encodings: PLAIN */
    put(&foot, 0);
    list(&foot, 3, T_BINARY, 1);         /* path_in_schema */
    varint(&foot, 1);
    put(&foot, 'x');
    int_field(&foot, 4, T_I32, spec->codec); /* codec */
    int_field(&foot, 5, T_I64, spec->n); /* num_values */
    int_field(&foot, 6, T_I64, (int64_t)page.n);
    int_field(&foot, 7, T_I64, (int64_t)page.n);
    int_field(&foot, 9, T_I64, 4);       /* data_page_offset */
    end(&foot);
    end(&foot);
    int_field(&foot, 2, T_I64, (int64_t)page.n); /* total_byte_size */
    int_field(&foot, 3, T_I64, spec->n);         /* num_rows */
    end(&foot);
    put(&foot, 0);

    *len = 4 + page.n + foot.n + 8;
    unsigned char *f = malloc(*len), *p = f;
    memcpy(p, "PAR1", 4);
    memcpy(p += 4, page.b, page.n);
    memcpy(p += page.n, foot.b, foot.n);
    p += foot.n;
    for (int k = 0; k < 4; k++)
        *p++ = (unsigned char)(foot.n >> (8 * k));
    memcpy(p, "PAR1", 4);
    return f;
}

/* Decodes column 0 of the file as float64 into dst (n rows). */
static int decode(const unsigned char *f, size_t len, double *dst, uint64_t n, struct err *e)
{
    size_t col = 0;
    struct parquet_select s = {"bad.parquet", STORE_F64, &col, 1};
    return parquet_read_rows(&s, f, len, dst, n, e);
}

static const int64_t three[] = {7, -2, 40000000000};

Test(parquet_bad, the_hand_written_file_decodes_to_its_values)
{
    size_t len;
    unsigned char *f = write_file(&(struct file_spec){.values = three, .n = 3}, &len);
    double got[3];
    struct err e = {0};
    cr_assert_eq(decode(f, len, got, 3, &e), ERR_OK, "%s", e.msg);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(got[i], (double)three[i], "row %d: %g", i, got[i]);
    free(f);
}

Test(parquet_bad, a_column_without_a_name_is_invalid_data)
{
    size_t len, col;
    unsigned char *f = write_file(&(struct file_spec){.values = three, .n = 3, .nameless = true}, &len);
    double got[3];
    struct err e = {0};
    cr_assert_eq(decode(f, len, got, 3, &e), ERR_INVALID_DATA);
    cr_assert(strstr(e.msg, "bad.parquet: parquet schema: element 1 has no name"), "%s", e.msg);
    cr_assert_not(parquet_column_named(f, len, "", &col), "a nameless column was found by the empty name");
    free(f);
}

/* A gzip page of 20 bytes whose header claims 100 MB: refused before room for it is set aside (deflate's best
   ratio is 1032:1). A claim the page could hold goes on to the codec, which finds the data corrupt. */
Test(parquet_bad, a_page_claiming_more_than_its_codec_can_expand_to_is_invalid_data)
{
    static const unsigned char gz[20] = {0x1f, 0x8b, 8}; /* a gzip header, then nothing that inflates */
    size_t len;
    unsigned char *f = write_file(&(struct file_spec){.values = three, .n = 3, .codec = 2, .body = gz,
                                                      .body_len = sizeof gz, .usize = 100 << 20}, &len);
    double got[3];
    struct err e = {0};
    cr_assert_eq(decode(f, len, got, 3, &e), ERR_INVALID_DATA);
    cr_assert(strstr(e.msg, "column x, row group 0: a page header claims more bytes than gzip expands its page to"),
              "%s", e.msg);
    free(f);
    f = write_file(&(struct file_spec){.values = three, .n = 3, .codec = 2, .body = gz, .body_len = sizeof gz,
                                       .usize = 20 * 1032}, &len);
    cr_assert_eq(decode(f, len, got, 3, &e), ERR_INVALID_DATA);
    cr_assert(strstr(e.msg, "gzip data is corrupt"), "%s", e.msg);
    free(f);
}
