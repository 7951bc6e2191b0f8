/* dataset_open.c — a dataset's opening: its partitions listed (and kaen's shard counts joined), their format and columns decided, empty ones skipped, and its settings checked. */
#include "dataset.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dataset_impl.h"
#include "parquet.h"
#include "shards.h"
#include "store_remote.h"

static size_t default_resident_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return (size_t)1 << 30;
    return (size_t)pages / 2 * (size_t)page;
}

static size_t default_threads(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores <= 1 ? 0 : cores - 1 > 4 ? 4 : (size_t)cores - 1;
}

static int join_shards(struct dataset *ds, const struct dataset_config *cfg, const struct store_access *acc,
                       struct err *e)
{
    struct store_shards s;
    int rc = store_shards_load(cfg->shards_url, acc, &s, e);
    if (rc)
        return rc;
    for (size_t i = 0; i < ds->n && rc == ERR_OK; i++) {
        uint64_t id, count;
        if (!store_shards_partition_id(ds->parts[i].obj->name, &id) || !store_shards_lookup(&s, id, &count))
            continue;
        ds->parts[i].rows = count; /* 0: an empty partition, skipped without reading it, as kaen does */
        ds->parts[i].known = true;
        ds->parts[i].from_shards = true;
    }
    store_shards_free(&s);
    return rc;
}

static int check_config(const struct dataset_config *cfg, struct err *e)
{
    if (!cfg || !cfg->url)
        return err_set(e, ERR_INVALID_ARG, "dataset needs a URL");
    if (cfg->batch_size == 0)
        return err_set(e, ERR_INVALID_ARG, "batch size must be positive");
    if (cfg->label_column < 0)
        return err_set(e, ERR_INVALID_ARG, "label column must be >= 0");
    if (cfg->features && cfg->n_features == 0)
        return err_set(e, ERR_INVALID_ARG, "a list of features needs one at least");
    if (cfg->dtype != STORE_F32 && cfg->dtype != STORE_F64)
        return err_set(e, ERR_INVALID_ARG, "dtype must be float32 or float64");
    if (cfg->format != DATASET_FORMAT_AUTO && cfg->format != DATASET_FORMAT_CSV &&
        cfg->format != DATASET_FORMAT_PARQUET)
        return err_set(e, ERR_INVALID_ARG, "format must be auto, csv or parquet");
    if (cfg->header != DATASET_HEADER_AUTO && cfg->header != DATASET_HEADER_YES &&
        cfg->header != DATASET_HEADER_NO)
        return err_set(e, ERR_INVALID_ARG, "header must be auto, yes or no");
    return ERR_OK;
}

/* The file column c names in partition i (b: its bytes, when names are used); what: "label" or "feature". */
static int resolve_column(const struct dataset *ds, size_t i, const struct csv_layout *lay, const struct store_blob *b,
                          const struct dataset_column *c, const char *what, size_t *col, struct err *e)
{
    const char *path = ds->parts[i].obj->path;
    if (!c->name) {
        if (c->index < 0 || (size_t)c->index >= lay->ncols)
            return err_set(e, ERR_INVALID_ARG, "%s: %s column %d, but rows have %zu columns", path, what, c->index,
                           lay->ncols);
        *col = (size_t)c->index;
        return ERR_OK;
    }
    bool found;
    if (ds->parts[i].footer)
        found = parquet_footer_column_named(ds->parts[i].footer, c->name, col);
    else if (ds->fmt.format == DATASET_FORMAT_PARQUET)
        found = parquet_column_named(b->data, b->len, c->name, col);
    else if (!lay->has_header)
        return err_set(e, ERR_INVALID_ARG, "%s: %s column \"%s\" by name, but the CSV has no header row", path, what,
                       c->name);
    else
        found = csv_column_named(b->data, b->len, c->name, col);
    return found ? ERR_OK : err_set(e, ERR_INVALID_ARG, "%s: no %s column \"%s\"", path, what, c->name);
}

/* ds->cols: the label, then the features as cfg lists them (or every other column); each at most once. */
static int choose_columns(struct dataset *ds, const struct dataset_config *cfg, size_t i, const struct csv_layout *lay,
                          struct err *e)
{
    bool named = cfg->label_name != NULL;
    for (size_t k = 0; k < cfg->n_features; k++)
        named |= cfg->features[k].name != NULL;
    named &= !ds->parts[i].footer; /* a Parquet footer at hand names the columns */
    struct store_blob b = {0};
    int rc = named ? store_map(&ds->url, ds->parts[i].obj, &b, e) : ERR_OK;
    size_t n = cfg->features ? 1 + cfg->n_features : lay->ncols;
    if (rc == ERR_OK && !(ds->cols = malloc(n * sizeof *ds->cols)))
        rc = err_set(e, ERR_NOMEM, "out of memory opening %s", ds->url_text);
    struct dataset_column label = {cfg->label_name, cfg->label_column};
    if (rc == ERR_OK)
        rc = resolve_column(ds, i, lay, &b, &label, "label", &ds->cols[0], e);
    for (size_t k = 1, c = 0; rc == ERR_OK && k < n; k++) {
        if (cfg->features) {
            rc = resolve_column(ds, i, lay, &b, &cfg->features[k - 1], "feature", &ds->cols[k], e);
        } else {
            c += c == ds->cols[0];
            ds->cols[k] = c++;
        }
        for (size_t j = 0; rc == ERR_OK && j < k; j++)
            if (ds->cols[j] == ds->cols[k])
                rc = err_set(e, ERR_INVALID_ARG, "%s: column %zu is chosen twice (label and features are distinct "
                             "columns)", ds->parts[i].obj->path, ds->cols[k]);
    }
    if (named)
        store_unmap(&b);
    if (rc)
        return rc;
    ds->fmt.label = ds->cols[0];
    /* "rest" is the readers' own layout: no selection to apply */
    ds->fmt.cols = cfg->features ? ds->cols : NULL;
    ds->fmt.n_cols = n;
    return ERR_OK;
}

/* Header decision, column count and the columns chosen, from partition i's first line, for every partition. */
static int decide_format(struct dataset *ds, const struct dataset_config *cfg, size_t i, const struct csv_layout *lay,
                         struct err *e)
{
    /* Every partition is read the way this one was: a bad first row elsewhere is an error, not a header. */
    ds->fmt.header = lay->has_header ? DATASET_HEADER_YES : DATASET_HEADER_NO;
    ds->fmt.ncols = lay->ncols;
    ds->fmt.schema = lay->schema; /* Parquet: every partition has these columns, in this order */
    int rc = choose_columns(ds, cfg, i, lay, e);
    if (rc)
        return rc;
    ds->stride = ds->fmt.n_cols * (cfg->dtype == STORE_F32 ? sizeof(float) : sizeof(double));
    if (ds->batch_size > SIZE_MAX / ds->stride)
        return err_set(e, ERR_INVALID_ARG, "batch size %zu is too large", ds->batch_size);
    return ERR_OK;
}

/* No partition has a data row: one file says what is wrong with it (line and column), many say so by the URL. */
static int all_empty(struct dataset *ds, struct err *e)
{
    struct csv_layout lay;
    int rc = ds->n == 1 && !ds->parts[0].from_shards ? dataset_part_measure(ds, 0, &lay, true, e) : ERR_OK;
    return rc ? rc : err_set(e, ERR_INVALID_DATA, "%s: no data rows in any of its %zu partitions", ds->url_text,
                             ds->n);
}

/*
 * Counts partitions in name order (the same for every seed) up to the first with a row: the first
 * with a line decides header and columns; a dataset of empty partitions fails here, not in training.
 */
static int find_rows(struct dataset *ds, const struct dataset_config *cfg, struct err *e)
{
    bool decided = false;
    for (size_t i = 0; i < ds->n; i++) {
        if (dataset_part_empty(ds, i))
            continue;
        struct csv_layout lay;
        int rc = dataset_part_measure(ds, i, &lay, false, e);
        if (rc == ERR_OK && !decided && lay.ncols) {
            rc = decide_format(ds, cfg, i, &lay, e);
            decided = true;
        }
        if (rc)
            return rc;
        if (ds->parts[i].rows)
            return ERR_OK;
    }
    return all_empty(ds, e);
}

/* Hadoop's hidden files, which Spark writes beside its part files: _SUCCESS, _committed_*, .part-0.parquet.crc. */
static bool hidden_name(const char *name)
{
    return name[0] == '_' || name[0] == '.';
}

static bool parquet_name(const char *name)
{
    static const char ext[] = ".parquet";
    size_t n = strlen(name);
    return n >= sizeof ext - 1 && strcasecmp(name + n - (sizeof ext - 1), ext) == 0;
}

/*
 * AUTO becomes Parquet when every name but hidden ones ends in ".parquet" (any case; one at
 * least), else CSV. Parquet partitions leave the hidden files out, so a folder Spark wrote
 * reads as its part files.
 */
static enum dataset_format settle_format(struct store_listing *l, enum dataset_format f)
{
    size_t n_parquet = 0, n_other = 0;
    for (size_t i = 0; i < l->n; i++) {
        n_parquet += !hidden_name(l->v[i].name) && parquet_name(l->v[i].name);
        n_other += !hidden_name(l->v[i].name) && !parquet_name(l->v[i].name);
    }
    if (f == DATASET_FORMAT_AUTO)
        f = n_parquet && !n_other ? DATASET_FORMAT_PARQUET : DATASET_FORMAT_CSV;
    if (f != DATASET_FORMAT_PARQUET)
        return f;
    size_t kept = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (hidden_name(l->v[i].name))
            store_object_free(&l->v[i]);
        else
            l->v[kept++] = l->v[i];
    }
    l->n = kept;
    return f;
}

/* Object i's footer: from the download cache, or read by range (and then cached there). *whole: the server
   sent the whole object instead of a range (so its row groups are better read as one partition). */
static int read_footer(struct dataset *ds, size_t i, bool *whole, struct err *e)
{
    *whole = false;
    const struct store_object *o = &ds->list.v[i];
    void *cached;
    size_t len;
    if (o->size && store_remote_cache_get(&ds->url, o, ".footer", &cached, &len)) {
        int rc = parquet_footer_parse(o->path, cached, len, o->size, &ds->footers[i], e);
        free(cached);
        if (rc == ERR_OK) {
            ds->bytes_total += o->size;
            return ERR_OK;
        }
    }
    struct store_reader *r;
    uint64_t size = 0;
    int rc = store_reader_open(&ds->url, o, &r, e);
    if (rc)
        return rc;
    if ((rc = store_reader_size(r, &size, e)) == ERR_OK)
        rc = parquet_footer_fetch(o->path, size, store_reader_read_cb, r, &ds->footers[i], e);
    __atomic_fetch_add(&ds->cache.fetched, store_reader_fetched(r), __ATOMIC_RELAXED);
    *whole = store_reader_whole(r);
    store_reader_close(r);
    ds->bytes_total += size;
    if (rc == ERR_OK && o->size) {
        const void *bytes = parquet_footer_bytes(ds->footers[i], &len);
        store_remote_cache_put(&ds->url, o, ".footer", bytes, len);
    }
    return rc;
}

/*
 * Every file's footer read and checked against the first's columns, and shards metadata against its rows.
 * whole[i]: file i's server sends whole objects only.
 */
static int read_footers(struct dataset *ds, const struct dataset_config *cfg, bool *whole, struct err *e)
{
    for (size_t i = 0; i < ds->n; i++) {
        struct csv_layout lay;
        uint64_t rows;
        int rc = read_footer(ds, i, &whole[i], e);
        ds->parts[i].footer = ds->footers[i];
        struct csv_format f = dataset_part_format(ds, i);
        if (rc == ERR_OK)
            rc = parquet_footer_measure(&f, ds->footers[i], &lay, &rows, e);
        if (rc == ERR_OK && ds->parts[i].from_shards && rows != ds->parts[i].rows)
            rc = err_set(e, ERR_INVALID_DATA, "%s: %llu rows, but shards metadata says %llu", f.name,
                         (unsigned long long)rows, (unsigned long long)ds->parts[i].rows);
        if (rc == ERR_OK && i == 0)
            rc = decide_format(ds, cfg, 0, &lay, e);
        if (rc)
            return rc;
    }
    return ERR_OK;
}

/* File i's partitions (each row group with rows, or the file whole) into parts, or counted when parts is NULL. */
static size_t split_file(const struct dataset *ds, size_t i, bool whole, struct part *parts)
{
    const struct parquet_footer *f = ds->footers[i];
    size_t k = 0;
    uint64_t all = 0;
    for (size_t g = 0; g < parquet_footer_groups(f); g++) {
        uint64_t rows = parquet_footer_group_rows(f, g);
        all += rows;
        if (rows && !whole && parts)
            parts[k] = (struct part){.obj = &ds->list.v[i], .rows = rows, .known = true, .footer = f, .group = g};
        k += rows && !whole;
    }
    /* A server without ranges would send the whole file for each row group: it is one partition then. */
    if (whole && all && parts)
        parts[0] = (struct part){.obj = &ds->list.v[i], .rows = all, .known = true};
    return whole ? all > 0 : k;
}

/*
 * Parquet: a partition a row group, listed from the files' footers (row counts and all), read at
 * open by range; files and row groups without rows are left out.
 */
static int open_row_groups(struct dataset *ds, const struct dataset_config *cfg, const struct store_access *acc,
                           struct err *e)
{
    ds->n = ds->list.n;
    ds->parts = calloc(ds->n ? ds->n : 1, sizeof *ds->parts);
    ds->footers = calloc(ds->n ? ds->n : 1, sizeof *ds->footers);
    bool *whole = calloc(ds->n ? ds->n : 1, sizeof *whole);
    int rc = ds->parts && ds->footers && whole ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory opening %s", cfg->url);
    for (size_t i = 0; rc == ERR_OK && i < ds->n; i++)
        ds->parts[i].obj = &ds->list.v[i];
    if (rc == ERR_OK && cfg->shards_url)
        rc = join_shards(ds, cfg, acc, e);
    if (rc == ERR_OK)
        rc = read_footers(ds, cfg, whole, e);
    size_t groups = 0;
    for (size_t i = 0; rc == ERR_OK && i < ds->list.n; i++)
        groups += split_file(ds, i, whole[i], NULL);
    struct part *parts = rc == ERR_OK ? calloc(groups ? groups : 1, sizeof *parts) : NULL;
    if (rc == ERR_OK && !parts)
        rc = err_set(e, ERR_NOMEM, "out of memory opening %s", cfg->url);
    for (size_t i = 0, k = 0; rc == ERR_OK && i < ds->list.n; i++)
        k += split_file(ds, i, whole[i], parts + k);
    free(whole);
    if (rc)
        return rc;
    free(ds->parts);
    ds->parts = parts;
    ds->n = groups;
    if (groups == 0)
        return ds->list.n == 1 ? err_set(e, ERR_INVALID_DATA, "%s: no rows", ds->list.v[0].path)
                               : err_set(e, ERR_INVALID_DATA, "%s: no data rows in any of its %zu partitions",
                                         ds->url_text, ds->list.n);
    return ERR_OK;
}

/* A partition a listed object: shards metadata joined, then read up to the first with rows. */
static int open_files(struct dataset *ds, const struct dataset_config *cfg, const struct store_access *acc,
                      struct err *e)
{
    ds->n = ds->list.n;
    ds->parts = calloc(ds->n, sizeof *ds->parts);
    if (!ds->parts)
        return err_set(e, ERR_NOMEM, "out of memory opening %s", cfg->url);
    for (size_t i = 0; i < ds->n; i++) {
        ds->parts[i].obj = &ds->list.v[i];
        ds->bytes_total += ds->list.v[i].size;
    }
    int rc = cfg->shards_url ? join_shards(ds, cfg, acc, e) : ERR_OK;
    return rc ? rc : find_rows(ds, cfg, e);
}

/* Lists the partitions and reads up to the first with rows: header decision, column count, the workers' tasks. */
static int open_parts(struct dataset *ds, const struct dataset_config *cfg, struct err *e)
{
    struct store_access acc = {cfg->data_roots, cfg->n_data_roots, cfg->remote};
    int rc = store_url_parse(cfg->url, &ds->url, e);
    if (rc == ERR_OK)
        rc = store_url_set_remote(&ds->url, cfg->remote, e);
    /* The cache dir's parsed/ folder serves every scheme, file:// included (our copy: cfg may go). */
    const struct store_remote *r = ds->url.remote;
    if (rc == ERR_OK && r && r->cache_dir && r->cache_dir[0]) {
        ds->cache.dir = r->cache_dir;
        ds->cache.limit = r->cache_limit;
    }
    if (rc == ERR_OK && (rc = store_list(&ds->url, &acc, &ds->list, e)) != ERR_OK)
        err_prefix(e, "%s", cfg->url);
    if (rc)
        return rc;
    ds->fmt.format = settle_format(&ds->list, ds->fmt.format);
    rc = ds->fmt.format == DATASET_FORMAT_PARQUET ? open_row_groups(ds, cfg, &acc, e)
                                                 : open_files(ds, cfg, &acc, e);
    if (rc)
        return rc;
    if (ds->shuffle_partitions) {
        if (!(ds->perm = malloc(ds->n * sizeof *ds->perm)))
            return err_set(e, ERR_NOMEM, "out of memory opening %s", cfg->url);
        shuffle_permutation(ds->perm, ds->n, ds->seed, 0);
        ds->perm_epoch = 0;
    }
    for (size_t i = 0; i < ds->n; i++) {
        /* what a worker reads: fixed from here on, so it never races with the reader */
        struct parse_task *t = &ds->parts[i].ahead;
        t->url = &ds->url;
        t->obj = ds->parts[i].obj;
        t->fmt = dataset_part_format(ds, i);
        t->stride = ds->stride;
        t->expect = ds->parts[i].from_shards ? ds->parts[i].rows : 0;
        t->bin = &ds->bin;
        t->cache = &ds->cache;
    }
    /* A buffer larger than the epoch holds the whole epoch: the draws are the same with less memory. */
    uint64_t total = dataset_num_rows(ds);
    ds->buf_alloc = total && total < ds->buf_cap ? (size_t)total : ds->buf_cap;
    if (ds->buf_alloc > SIZE_MAX / ds->stride)
        return err_set(e, ERR_INVALID_ARG, "shuffle buffer of %zu rows is too large", ds->buf_cap);
    if (ds->buf_alloc && !(ds->buf_rows = malloc(ds->buf_alloc * ds->stride)))
        return err_set(e, ERR_NOMEM, "out of memory for a shuffle buffer of %zu rows", ds->buf_alloc);
    return ERR_OK;
}

int dataset_open(const struct dataset_config *cfg, struct dataset **out, struct err *e)
{
    *out = NULL;
    int rc = check_config(cfg, e);
    if (rc)
        return rc;
    struct dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->url_text = strdup(cfg->url))) {
        free(ds);
        return err_set(e, ERR_NOMEM, "out of memory opening %s", cfg->url);
    }
    ds->fmt.format = cfg->format;
    ds->fmt.header = cfg->header;
    ds->fmt.dtype = cfg->dtype;
    ds->fmt.label = (size_t)cfg->label_column;
    ds->batch_size = cfg->batch_size;
    ds->drop_last = cfg->drop_last;
    ds->resident_limit = cfg->resident_limit ? cfg->resident_limit : default_resident_limit();
    ds->scratch_part = NO_PART;
    if ((rc = rows_bin_init(&ds->bin, e)) != ERR_OK) {
        dataset_close(ds);
        return rc;
    }
    ds->bin_ok = true;
    ds->seed = cfg->seed;
    ds->shuffle_partitions = cfg->shuffle_partitions;
    ds->buf_cap = cfg->shuffle_buffer;
    if (cfg->share_n > 1) {
        if (cfg->share_rank < 0 || cfg->share_rank >= cfg->share_n) {
            dataset_close(ds);
            return err_set(e, ERR_INVALID_ARG, "share %d of %d", cfg->share_rank, cfg->share_n);
        }
        ds->share_rank = cfg->share_rank;
        ds->share_n = cfg->share_n;
        ds->share_epoch = UINT64_MAX;
    }
    ds->threads = cfg->parse_threads < 0 ? 0 : cfg->parse_threads > 0 ? (size_t)cfg->parse_threads : default_threads();
    if (ds->threads > 64)
        ds->threads = 64;
    rc = open_parts(ds, cfg, e);
    if (rc) {
        dataset_close(ds);
        return rc;
    }
    *out = ds;
    return ERR_OK;
}
