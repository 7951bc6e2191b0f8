/* parquet.c — a Parquet file's selected column chunks, page by page, into rows (parquet.h). */
#include "parquet.h"

#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "parquet_meta.h"
#include "parquet_page.h"

/* Buffers reused from page to page and chunk to chunk. */
struct scratch {
    unsigned char *page;
    size_t page_cap;
    uint64_t *raw;
    size_t raw_cap;
    unsigned char *dict;         /* the chunk's dictionary, already in the job's dtype */
    size_t dict_n, dict_cap;
    unsigned char *cols;         /* a row group's columns one after the other, before they become rows */
    size_t cols_cap;
};

static bool grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    void *q = realloc(*p, need ? need : 1);
    if (!q)
        return false;
    *p = q;
    *cap = need;
    return true;
}

static void scratch_free(struct scratch *sc)
{
    free(sc->page);
    free(sc->raw);
    free(sc->dict);
    free(sc->cols);
}

/* One column chunk being read: where its messages point (file, column, row group) and where its values go. */
struct chunk {
    const char *file;
    const struct pq_column *col;
    const struct pq_chunk *meta;
    size_t group;
    uint64_t first_row;          /* the row group's first row in the file */
    unsigned char *out;          /* the group's first row, at this column */
    size_t stride;
    bool f32;
    struct scratch *s;
};

static int chunk_err(const struct chunk *c, struct err *e, const char *why)
{
    return err_set(e, ERR_INVALID_DATA, "%s: column %.*s, row group %zu: %s", c->file, (int)c->col->name_len,
                   c->col->name, c->group, why);
}

static int null_err(const struct chunk *c, struct err *e, uint64_t row)
{
    return err_set(e, ERR_INVALID_DATA, "%s: column %.*s, row group %zu: a null at row %llu (selected columns may not "
                   "hold nulls)", c->file, (int)c->col->name_len, c->col->name, c->group, (unsigned long long)row);
}

static int oom(const struct chunk *c, struct err *e)
{
    return err_set(e, ERR_NOMEM, "%s: column %.*s, row group %zu: out of memory", c->file, (int)c->col->name_len,
                   c->col->name, c->group);
}

/* The page's bytes uncompressed into the scratch page (or in place when stored so). */
static int page_bytes(const struct chunk *c, const unsigned char *src, size_t n, size_t want, bool compressed,
                      const unsigned char **out, struct err *e)
{
    const char *why;
    if (!compressed || c->meta->codec == PQ_UNCOMPRESSED) {
        if (n != want)
            return chunk_err(c, e, "decompressed size differs from the page header's");
        *out = src;
        return ERR_OK;
    }
    if (!pq_decompress_fits(c->meta->codec, src, n, want, &why))
        return chunk_err(c, e, why);
    if (!grow((void **)&c->s->page, &c->s->page_cap, want))
        return oom(c, e);
    if (!pq_decompress(c->meta->codec, src, n, c->s->page, want, &why))
        return chunk_err(c, e, why);
    *out = c->s->page;
    return ERR_OK;
}

static int read_dictionary(const struct chunk *c, const struct pq_page *pg, const unsigned char *src, struct err *e)
{
    const unsigned char *p;
    const char *why;
    if (pg->encoding != PQ_PLAIN && pg->encoding != PQ_PLAIN_DICTIONARY)
        return chunk_err(c, e, "a dictionary page in an unsupported encoding");
    if (pg->num_values < 0)
        return chunk_err(c, e, "a dictionary page without its value count");
    int rc = page_bytes(c, src, (size_t)pg->compressed_size, (size_t)pg->uncompressed_size, true, &p, e);
    if (rc)
        return rc;
    size_t n = (size_t)pg->num_values;
    if (n > (size_t)pg->uncompressed_size * 8 + 8) /* no value takes less than a bit */
        return chunk_err(c, e, "a dictionary page holds fewer values than it says");
    const size_t esz = c->f32 ? sizeof(float) : sizeof(double);
    if (!grow((void **)&c->s->raw, &c->s->raw_cap, n * sizeof(uint64_t)) ||
        !grow((void **)&c->s->dict, &c->s->dict_cap, n * esz))
        return oom(c, e);
    if (!pq_decode_values(PQ_PLAIN, c->col, p, (size_t)pg->uncompressed_size, n, c->s->raw, &why))
        return chunk_err(c, e, why);
    pq_convert(c->col, c->f32, c->s->raw, n, c->s->dict, esz); /* once an entry, not once a value */
    c->s->dict_n = n;
    return ERR_OK;
}

/* A data page (v1 or v2) of n values, the rows from `done` on. */
static int read_data(const struct chunk *c, const struct pq_page *pg, const unsigned char *src, uint64_t done,
                     bool have_dict, struct err *e)
{
    const bool optional = c->col->repetition == PQ_OPTIONAL;
    const size_t n = (size_t)pg->num_values;
    const unsigned char *levels = NULL, *vals;
    size_t levels_len = 0, vals_len;
    const char *why;
    int rc;
    if (pg->type == PQ_DATA_PAGE) {
        if ((rc = page_bytes(c, src, (size_t)pg->compressed_size, (size_t)pg->uncompressed_size, true, &vals, e)))
            return rc;
        vals_len = (size_t)pg->uncompressed_size;
        if (optional) {
            if (pg->def_encoding != PQ_RLE)
                return chunk_err(c, e, "definition levels in an unsupported encoding");
            if (vals_len < 4)
                return chunk_err(c, e, "definition levels end early");
            levels_len = (size_t)vals[0] | (size_t)vals[1] << 8 | (size_t)vals[2] << 16 | (size_t)vals[3] << 24;
            if (levels_len > vals_len - 4)
                return chunk_err(c, e, "definition levels run past their page");
            levels = vals + 4;
            vals += 4 + levels_len;
            vals_len -= 4 + levels_len;
        }
    } else {
        if (pg->rep_bytes != 0)
            return chunk_err(c, e, "repetition levels in a flat column");
        if (pg->def_bytes < 0 || pg->def_bytes > pg->compressed_size || pg->def_bytes > pg->uncompressed_size)
            return chunk_err(c, e, "definition levels run past their page");
        if (!optional && pg->def_bytes)
            return chunk_err(c, e, "definition levels in a required column");
        if (pg->num_nulls < 0)
            return chunk_err(c, e, "a negative null count");
        levels = src;
        levels_len = (size_t)pg->def_bytes;
        size_t skip = levels_len;
        if ((rc = page_bytes(c, src + skip, (size_t)pg->compressed_size - skip, (size_t)pg->uncompressed_size - skip,
                             pg->v2_compressed, &vals, e)))
            return rc;
        vals_len = (size_t)pg->uncompressed_size - skip;
    }
    size_t first_null;
    if (optional && !pq_levels_defined(levels, levels_len, n, &first_null, &why))
        return why ? chunk_err(c, e, why) : null_err(c, e, c->first_row + done + first_null);
    if (pg->type == PQ_DATA_PAGE_V2 && pg->num_nulls > 0)
        return chunk_err(c, e, "the page counts nulls its levels do not show");
    unsigned char *out = c->out + (size_t)done * c->stride;
    bool ok;
    if (pg->encoding == PQ_PLAIN_DICTIONARY || pg->encoding == PQ_RLE_DICTIONARY) {
        ok = pq_decode_dict(vals, vals_len, n, have_dict ? c->s->dict : NULL, c->s->dict_n,
                            c->f32 ? sizeof(float) : sizeof(double), out, c->stride, &why);
    } else if (pg->encoding == PQ_PLAIN && pq_plain_direct(c->col)) {
        ok = pq_decode_plain_into(c->col, c->f32, vals, vals_len, n, out, c->stride, &why);
    } else {
        if (!grow((void **)&c->s->raw, &c->s->raw_cap, n * sizeof(uint64_t)))
            return oom(c, e);
        if ((ok = pq_decode_values(pg->encoding, c->col, vals, vals_len, n, c->s->raw, &why)))
            pq_convert(c->col, c->f32, c->s->raw, n, out, c->stride);
    }
    return ok ? ERR_OK : chunk_err(c, e, why);
}

/* Walks the chunk's pages from its first (the dictionary, if any) until it has one value a row. */
static int read_chunk(const struct chunk *c, const unsigned char *buf, uint64_t rows, struct err *e)
{
    const struct pq_chunk *m = c->meta;
    if ((uint64_t)m->num_values != rows)
        return chunk_err(c, e, "the chunk's value count is not its row group's row count");
    size_t pos = 0;
    const size_t end = (size_t)m->total_compressed_size; /* buf holds them: pq_footer_read checked the file has */
    uint64_t done = 0;
    bool have_dict = false;
    c->s->dict_n = 0;
    while (done < rows) {
        struct pq_page pg;
        size_t hl;
        const char *why;
        if (pos >= end)
            return chunk_err(c, e, "the pages end before the chunk's values");
        if (!pq_page_read(buf + pos, buf + end, &pg, &hl, &why))
            return chunk_err(c, e, why);
        const unsigned char *src = buf + pos + hl;
        if ((size_t)pg.compressed_size > end - pos - hl)
            return chunk_err(c, e, "a page runs past its column chunk");
        int rc = ERR_OK;
        if (pg.type == PQ_DICTIONARY_PAGE) {
            if (have_dict || done)
                return chunk_err(c, e, "a dictionary page after the first page");
            rc = read_dictionary(c, &pg, src, e);
            have_dict = true;
        } else if (pg.type == PQ_DATA_PAGE || pg.type == PQ_DATA_PAGE_V2) {
            if (pg.num_values < 0 || (uint64_t)pg.num_values > rows - done)
                return chunk_err(c, e, "a page holds more values than the row group has rows");
            rc = read_data(c, &pg, src, done, have_dict, e);
            done += (uint64_t)pg.num_values;
        } /* index pages and pages of types to come are passed over */
        if (rc)
            return rc;
        pos += hl + (size_t)pg.compressed_size;
    }
    return ERR_OK;
}

/* For messages: parquet.thrift's names of a column's physical type and a chunk's codec. */
static const char *type_name(int type)
{
    static const char *const names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                        "FIXED_LEN_BYTE_ARRAY"};
    return type >= 0 && (size_t)type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

static const char *codec_name(int codec)
{
    static const char *const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return codec >= 0 && (size_t)codec < sizeof names / sizeof names[0] ? names[codec] : "unknown";
}

static bool type_supported(const struct pq_column *col)
{
    int type = col->type;
    return type == PQ_BOOLEAN || type == PQ_INT32 || type == PQ_INT64 || type == PQ_FLOAT || type == PQ_DOUBLE ||
           (type == PQ_FIXED_LEN_BYTE_ARRAY && col->decimal);
}

bool parquet_column_named(const void *buf, size_t len, const char *name, size_t *col)
{
    struct pq_file f;
    struct err e;
    if (pq_file_read("", buf, len, &f, &e) != ERR_OK)
        return false;
    size_t want = strlen(name);
    bool found = false;
    for (size_t c = 0; c < f.n_cols && !found; c++)
        if (f.cols[c].name_len == want && memcmp(f.cols[c].name, name, want) == 0) {
            *col = c;
            found = true;
        }
    pq_file_free(&f);
    return found;
}

/* The selected columns exist, are numbers, and are written in codecs we have in row groups [g0, g1). */
static int check_columns(const struct parquet_select *s, const struct pq_file *f, size_t g0, size_t g1,
                         struct err *e)
{
    for (size_t j = 0; j < s->ncols; j++) {
        if (s->cols[j] >= f->n_cols)
            return err_set(e, ERR_INVALID_ARG, "%s: column %zu, but the file has %zu columns", s->name, s->cols[j],
                           f->n_cols);
        const struct pq_column *col = &f->cols[s->cols[j]];
        if (!type_supported(col))
            return err_set(e, ERR_INVALID_DATA, "%s: column %.*s: %s%s is not a number traind reads", s->name,
                           (int)col->name_len, col->name, type_name(col->type),
                           col->type == PQ_FIXED_LEN_BYTE_ARRAY ? " (other than a DECIMAL)" : "");
        for (size_t g = g0; g < g1; g++)
            if (!pq_codec_known(f->groups[g].chunks[s->cols[j]].codec))
                return err_set(e, ERR_INVALID_DATA, "%s: column %.*s, row group %zu: codec %s is not supported",
                               s->name, (int)col->name_len, col->name, g,
                               codec_name(f->groups[g].chunks[s->cols[j]].codec));
    }
    return ERR_OK;
}

static int check_select(const struct parquet_select *s, const struct pq_file *f, uint64_t rows, struct err *e)
{
    if ((uint64_t)f->num_rows != rows)
        return err_set(e, ERR_INVALID_DATA, "%s: %lld rows, %llu expected", s->name, (long long)f->num_rows,
                       (unsigned long long)rows);
    return check_columns(s, f, 0, f->n_groups, e);
}

/*
 * A row group of several columns is decoded column by column, each into its own run of sc->cols,
 * then written as rows in address order with non-temporal stores: decoded straight into the rows,
 * each column would write a value every `stride` bytes all over rows that outgrow the caches, and
 * every cache line of the rows would be read from memory before being written, once a column.
 */
enum { COLS_MAX_BYTES = 64 << 20 };

static void interleave(const unsigned char *cols, size_t rows, size_t ncols, size_t esz, unsigned char *out)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < ncols; j++, out += esz) {
            const unsigned char *v = cols + (j * rows + r) * esz;
#if defined(__SSE2__) && defined(__x86_64__)
            if (esz == sizeof(double)) {
                long long w;
                memcpy(&w, v, sizeof w);
                _mm_stream_si64((long long *)(void *)out, w);
            } else {
                int w;
                memcpy(&w, v, sizeof w);
                _mm_stream_si32((int *)(void *)out, w);
            }
#else
            memcpy(out, v, esz);
#endif
        }
#if defined(__SSE2__) && defined(__x86_64__)
    _mm_sfence(); /* the streamed rows are visible before anyone is told they are there */
#endif
}

/*
 * The selected columns of row group g (the file's rows [first, first + its rows)) into the rows
 * at rows_at; src[j] holds the chunk of the j-th selected column, from its first byte.
 */
static int decode_group(const struct parquet_select *s, const struct pq_file *f, size_t g, uint64_t first,
                        const unsigned char *const *src, unsigned char *rows_at, struct scratch *sc,
                        struct err *e)
{
    const struct pq_row_group *rg = &f->groups[g];
    const size_t esz = s->dtype == STORE_F32 ? sizeof(float) : sizeof(double), rows = (size_t)rg->num_rows;
    const bool by_column = s->ncols > 1 && rows <= COLS_MAX_BYTES / esz / s->ncols &&
                           grow((void **)&sc->cols, &sc->cols_cap, rows * s->ncols * esz);
    int rc = ERR_OK;
    for (size_t j = 0; j < s->ncols && rc == ERR_OK; j++) {
        struct chunk c = {
            .file = s->name, .col = &f->cols[s->cols[j]], .meta = &rg->chunks[s->cols[j]], .group = g,
            .first_row = first, .out = by_column ? sc->cols + j * rows * esz : rows_at + j * esz,
            .stride = by_column ? esz : s->ncols * esz, .f32 = s->dtype == STORE_F32, .s = sc,
        };
        rc = read_chunk(&c, src[j], (uint64_t)rg->num_rows, e);
    }
    if (rc == ERR_OK && by_column)
        interleave(sc->cols, rows, s->ncols, esz, rows_at);
    return rc;
}

int parquet_read_rows(const struct parquet_select *s, const void *buf, size_t len, void *dst, uint64_t rows,
                      struct err *e)
{
    struct pq_file f;
    int rc = pq_file_read(s->name, buf, len, &f, e);
    if (rc)
        return rc;
    if ((rc = check_select(s, &f, rows, e))) {
        pq_file_free(&f);
        return rc;
    }
    const size_t esz = s->dtype == STORE_F32 ? sizeof(float) : sizeof(double);
    const unsigned char **src = malloc((s->ncols ? s->ncols : 1) * sizeof *src);
    if (!src)
        rc = err_set(e, ERR_NOMEM, "%s: out of memory", s->name);
    struct scratch sc = {0};
    uint64_t first = 0;
    for (size_t g = 0; g < f.n_groups && rc == ERR_OK; g++) {
        const struct pq_row_group *rg = &f.groups[g];
        for (size_t j = 0; j < s->ncols; j++)
            src[j] = (const unsigned char *)buf + pq_chunk_start(&rg->chunks[s->cols[j]]);
        rc = decode_group(s, &f, g, first, src, (unsigned char *)dst + (size_t)first * s->ncols * esz, &sc, e);
        first += (uint64_t)rg->num_rows;
    }
    free(src);
    scratch_free(&sc);
    pq_file_free(&f);
    return rc;
}

/* FNV-1a over the columns' names and types, so partitions that differ in either (or in order) differ here. */
static uint64_t schema_hash(const struct pq_file *f)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t c = 0; c < f->n_cols; c++) {
        for (size_t i = 0; i < f->cols[c].name_len; i++)
            h = (h ^ (unsigned char)f->cols[c].name[i]) * 0x100000001b3ULL;
        h = (h ^ (0x100u + (unsigned)f->cols[c].type)) * 0x100000001b3ULL; /* ends the name, says the type */
    }
    return h ? h : 1;
}

/* A partition's columns against the dataset's: their count and, once known, their schema. */
static int check_layout(const struct csv_format *f, const struct csv_layout *lay, struct err *e)
{
    if (lay->ncols == 0)
        return err_set(e, ERR_INVALID_DATA, "%s: a Parquet file without columns", f->name);
    if (f->ncols && lay->ncols != f->ncols)
        return err_set(e, ERR_INVALID_DATA, "%s: %zu columns, expected %zu", f->name, lay->ncols, f->ncols);
    if (f->schema && lay->schema != f->schema)
        return err_set(e, ERR_INVALID_DATA, "%s: its columns (names, types or order) are not the first partition's",
                       f->name);
    return ERR_OK;
}

int parquet_measure(const struct csv_format *f, const char *buf, size_t len, struct csv_layout *lay,
                    uint64_t *rows, struct err *e)
{
    *lay = (struct csv_layout){0};
    struct pq_file pf;
    int rc = pq_file_read(f->name, (const unsigned char *)buf, len, &pf, e);
    if (rc)
        return rc;
    lay->ncols = pf.n_cols;
    lay->schema = schema_hash(&pf);
    *rows = (uint64_t)pf.num_rows;
    pq_file_free(&pf);
    return check_layout(f, lay, e);
}


/* The selection a csv_format makes: f->cols, or the label then every other column (*owned: free it). */
static int format_select(const struct csv_format *f, struct parquet_select *s, size_t **owned, struct err *e)
{
    *owned = NULL;
    if (f->ncols == 0 || f->label >= f->ncols)
        return err_set(e, ERR_INVALID_ARG, "%s: label column %zu, but rows have %zu columns", f->name, f->label,
                       f->ncols);
    *s = (struct parquet_select){f->name, f->dtype, f->cols, f->n_cols};
    if (f->cols)
        return ERR_OK;
    size_t *cols = malloc(f->ncols * sizeof *cols);
    if (!cols)
        return err_set(e, ERR_NOMEM, "%s: out of memory", f->name);
    cols[0] = f->label;
    for (size_t c = 0, j = 1; c < f->ncols; c++)
        if (c != f->label)
            cols[j++] = c;
    s->cols = *owned = cols;
    s->ncols = f->ncols;
    return ERR_OK;
}

int parquet_parse_rows(const struct csv_format *f, const char *buf, size_t len, void *dst, uint64_t rows,
                       struct err *e)
{
    struct parquet_select s;
    size_t *owned;
    int rc = format_select(f, &s, &owned, e);
    if (rc == ERR_OK)
        rc = parquet_read_rows(&s, buf, len, dst, rows, e);
    free(owned);
    return rc;
}

/* ---- ranged reads: the footer once, then a row group's selected chunks ---- */

struct parquet_footer {
    unsigned char *bytes;     /* the file's last len bytes: metadata, its length, "PAR1" */
    size_t len;
    uint64_t size;            /* the file's */
    struct pq_file meta;      /* names point into bytes */
};

/* Takes bytes (malloc'ed, the file's last len bytes) whatever happens. */
static int footer_make(const char *name, unsigned char *bytes, size_t len, uint64_t size,
                       struct parquet_footer **out, struct err *e)
{
    struct parquet_footer *f = calloc(1, sizeof *f);
    if (!f) {
        free(bytes);
        return err_set(e, ERR_NOMEM, "%s: out of memory", name);
    }
    *f = (struct parquet_footer){bytes, len, size, {0}};
    int rc = pq_footer_read(name, bytes, len, size, &f->meta, e);
    if (rc) {
        parquet_footer_free(f);
        return rc;
    }
    *out = f;
    return ERR_OK;
}

int parquet_footer_parse(const char *name, const void *tail, size_t len, uint64_t size,
                         struct parquet_footer **out, struct err *e)
{
    *out = NULL;
    unsigned char *bytes = malloc(len ? len : 1);
    if (!bytes)
        return err_set(e, ERR_NOMEM, "%s: out of memory", name);
    memcpy(bytes, tail, len);
    return footer_make(name, bytes, len, size, out, e);
}

int parquet_footer_fetch(const char *name, uint64_t size, parquet_read_fn rd, void *arg,
                         struct parquet_footer **out, struct err *e)
{
    *out = NULL;
    /* A small file's footer is small too: a guess of a fixed 64 KiB would read most of it. */
    uint64_t guess = size / 32 < PARQUET_FOOTER_MIN ? PARQUET_FOOTER_MIN
                   : size / 32 > PARQUET_FOOTER_GUESS ? PARQUET_FOOTER_GUESS : size / 32;
    size_t got = size < guess ? (size_t)size : (size_t)guess, len;
    if (got < 12)
        return err_set(e, ERR_INVALID_DATA, "%s: %llu bytes: too short for a Parquet file", name,
                       (unsigned long long)size);
    unsigned char *tail = malloc(got);
    if (!tail)
        return err_set(e, ERR_NOMEM, "%s: out of memory", name);
    int rc = rd(arg, size - got, got, tail, e);
    if (rc == ERR_OK)
        rc = pq_footer_len(name, tail + got - 8, size, &len, e);
    if (rc) {
        free(tail);
        return rc;
    }
    if (len <= got) { /* the usual case: the guess held it all */
        memmove(tail, tail + got - len, len);
        return footer_make(name, tail, len, size, out, e);
    }
    unsigned char *all = realloc(tail, len);
    if (!all) {
        free(tail);
        return err_set(e, ERR_NOMEM, "%s: out of memory for a footer of %zu bytes", name, len);
    }
    memmove(all + len - got, all, got);
    if ((rc = rd(arg, size - len, len - got, all, e)) != ERR_OK) {
        free(all);
        return rc;
    }
    return footer_make(name, all, len, size, out, e);
}

void parquet_footer_free(struct parquet_footer *f)
{
    if (!f)
        return;
    pq_file_free(&f->meta);
    free(f->bytes);
    free(f);
}

const void *parquet_footer_bytes(const struct parquet_footer *f, size_t *len)
{
    *len = f->len;
    return f->bytes;
}

size_t parquet_footer_groups(const struct parquet_footer *f)
{
    return f->meta.n_groups;
}

uint64_t parquet_footer_group_rows(const struct parquet_footer *f, size_t g)
{
    return g < f->meta.n_groups ? (uint64_t)f->meta.groups[g].num_rows : 0;
}

bool parquet_footer_column_named(const struct parquet_footer *f, const char *name, size_t *col)
{
    size_t want = strlen(name);
    for (size_t c = 0; c < f->meta.n_cols; c++)
        if (f->meta.cols[c].name_len == want && memcmp(f->meta.cols[c].name, name, want) == 0) {
            *col = c;
            return true;
        }
    return false;
}

int parquet_footer_measure(const struct csv_format *fm, const struct parquet_footer *f, struct csv_layout *lay,
                           uint64_t *rows, struct err *e)
{
    *lay = (struct csv_layout){0};
    lay->ncols = f->meta.n_cols;
    lay->schema = schema_hash(&f->meta);
    *rows = (uint64_t)f->meta.num_rows;
    return check_layout(fm, lay, e);
}

/* One read of the file: [off, off + len), holding the chunks of some selected columns. */
struct span {
    uint64_t off, len;
    unsigned char *bytes;
};

static int by_offset(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * The reads that bring group g's chunks of the selected columns: one a chunk, sorted, and
 * neighbours less than PARQUET_COALESCE_GAP apart joined (the gap is read too). *n gets how many.
 */
static struct span *plan_spans(const struct parquet_select *s, const struct pq_row_group *rg, size_t *n)
{
    struct span *v = malloc((s->ncols ? s->ncols : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t j = 0; j < s->ncols; j++)
        v[j] = (struct span){(uint64_t)pq_chunk_start(&rg->chunks[s->cols[j]]),
                             (uint64_t)rg->chunks[s->cols[j]].total_compressed_size, NULL};
    qsort(v, s->ncols, sizeof *v, by_offset);
    size_t k = 0;
    for (size_t j = 0; j < s->ncols; j++) {
        if (k && v[j].off <= v[k - 1].off + v[k - 1].len + PARQUET_COALESCE_GAP) {
            uint64_t end = v[j].off + v[j].len;
            if (end > v[k - 1].off + v[k - 1].len)
                v[k - 1].len = end - v[k - 1].off;
        } else {
            v[k++] = v[j];
        }
    }
    *n = k;
    return v;
}

/* Reads the spans, then decodes each selected chunk from the span holding it. */
static int read_group(const struct parquet_select *s, const struct pq_file *f, size_t g, uint64_t first,
                      parquet_read_fn rd, void *arg, void *dst, struct err *e)
{
    const struct pq_row_group *rg = &f->groups[g];
    size_t n = 0;
    struct span *v = plan_spans(s, rg, &n);
    const unsigned char **src = malloc((s->ncols ? s->ncols : 1) * sizeof *src);
    int rc = ERR_OK;
    if (!v || !src)
        rc = err_set(e, ERR_NOMEM, "%s: row group %zu: out of memory", s->name, g);
    for (size_t k = 0; k < n && rc == ERR_OK; k++) {
        if (!(v[k].bytes = malloc(v[k].len ? (size_t)v[k].len : 1)))
            rc = err_set(e, ERR_NOMEM, "%s: row group %zu: out of memory for %llu bytes", s->name, g,
                         (unsigned long long)v[k].len);
        else
            rc = rd(arg, v[k].off, (size_t)v[k].len, v[k].bytes, e);
    }
    for (size_t j = 0; j < s->ncols && rc == ERR_OK; j++) {
        uint64_t at = (uint64_t)pq_chunk_start(&rg->chunks[s->cols[j]]);
        size_t k = 0;
        while (k + 1 < n && v[k + 1].off <= at)
            k++;
        src[j] = v[k].bytes + (at - v[k].off);
    }
    struct scratch sc = {0};
    if (rc == ERR_OK)
        rc = decode_group(s, f, g, first, src, dst, &sc, e);
    for (size_t k = 0; v && k < n; k++)
        free(v[k].bytes);
    free(v);
    free(src);
    scratch_free(&sc);
    return rc;
}

int parquet_parse_group(const struct csv_format *fm, const struct parquet_footer *f, size_t g, parquet_read_fn rd,
                        void *arg, void *dst, uint64_t rows, struct err *e)
{
    if (g >= f->meta.n_groups)
        return err_set(e, ERR_INVALID_ARG, "%s: row group %zu of %zu", fm->name, g, f->meta.n_groups);
    if ((uint64_t)f->meta.groups[g].num_rows != rows)
        return err_set(e, ERR_INVALID_DATA, "%s: row group %zu: %lld rows, %llu expected", fm->name, g,
                       (long long)f->meta.groups[g].num_rows, (unsigned long long)rows);
    struct parquet_select s;
    size_t *owned;
    int rc = format_select(fm, &s, &owned, e);
    if (rc == ERR_OK)
        rc = check_columns(&s, &f->meta, g, g + 1, e);
    uint64_t first = 0;
    for (size_t k = 0; k < g; k++)
        first += (uint64_t)f->meta.groups[k].num_rows;
    if (rc == ERR_OK && rows)
        rc = read_group(&s, &f->meta, g, first, rd, arg, dst, e);
    free(owned);
    return rc;
}
