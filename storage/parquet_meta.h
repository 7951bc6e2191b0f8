/* parquet_meta.h — internal to storage/: a Parquet file's footer and page headers, as far as the reader needs them. */
#ifndef TRAIND_STORAGE_PARQUET_META_H
#define TRAIND_STORAGE_PARQUET_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The values parquet.thrift gives these enums. */
enum pq_type { PQ_BOOLEAN, PQ_INT32, PQ_INT64, PQ_INT96, PQ_FLOAT, PQ_DOUBLE, PQ_BYTE_ARRAY, PQ_FIXED_LEN_BYTE_ARRAY };
enum pq_repetition { PQ_REQUIRED, PQ_OPTIONAL, PQ_REPEATED };
enum pq_encoding {
    PQ_PLAIN = 0,
    PQ_PLAIN_DICTIONARY = 2,
    PQ_RLE = 3,
    PQ_BIT_PACKED = 4,
    PQ_DELTA_BINARY_PACKED = 5,
    PQ_RLE_DICTIONARY = 8,
    PQ_BYTE_STREAM_SPLIT = 9,
};
enum pq_codec { PQ_UNCOMPRESSED, PQ_SNAPPY, PQ_GZIP, PQ_LZO, PQ_BROTLI, PQ_LZ4, PQ_ZSTD, PQ_LZ4_RAW };
enum pq_page_type { PQ_DATA_PAGE, PQ_INDEX_PAGE, PQ_DICTIONARY_PAGE, PQ_DATA_PAGE_V2 };

/* A leaf column of a flat schema (the root's children). name points into the file's bytes. */
struct pq_column {
    const char *name;
    size_t name_len;
    int type;                  /* enum pq_type; -1 when the element had none (a group) */
    int repetition;            /* enum pq_repetition */
    int scale;                 /* an integer column's value is v / 10^scale: DECIMAL's scale, a TIMESTAMP's
                                  unit (3: ms, 6: us, 9: ns, so the value is in seconds); 0 otherwise */
    int type_length;           /* FIXED_LEN_BYTE_ARRAY: bytes a value */
    bool decimal;              /* a DECIMAL (FIXED_LEN_BYTE_ARRAY is read only as one) */
};

/* One column chunk: where its pages are and how they are written. */
struct pq_chunk {
    int type;                  /* enum pq_type, as the chunk says (must agree with the schema) */
    int codec;                 /* enum pq_codec */
    int64_t num_values;        /* values including nulls */
    int64_t data_page_offset;
    int64_t dictionary_page_offset; /* -1 when absent (see pq_chunk_start) */
    int64_t total_compressed_size;
    bool external;             /* file_path set: the chunk lives in another file */
    bool has_meta;
};

struct pq_row_group {
    int64_t num_rows;
    struct pq_chunk *chunks;   /* one per leaf column, in schema order */
    size_t n_chunks;
};

struct pq_file {
    int64_t num_rows;
    struct pq_column *cols;
    size_t n_cols;
    struct pq_row_group *groups;
    size_t n_groups;
};

/*
 * Checks "PAR1" at both ends and the footer length, and decodes the FileMetaData
 * into f (free with pq_file_free): a flat schema of leaf columns, row groups and
 * their chunks, unknown fields skipped. ERR_INVALID_DATA naming `name` otherwise;
 * nested or repeated columns are refused with their name.
 */
int pq_file_read(const char *name, const unsigned char *buf, size_t len, struct pq_file *f, struct err *e);

/*
 * The same from the footer alone, for ranged reads: pq_footer_len takes the file's last 8 bytes
 * (the metadata's length and "PAR1") and says how many bytes at the end of a file of file_size
 * bytes the footer takes (metadata, length, magic); pq_footer_read decodes those bytes, checking
 * every chunk against file_size. f's names point into footer. ERR_INVALID_DATA naming `name`.
 */
#define PQ_FOOTER_MAX (64u << 20)
int pq_footer_len(const char *name, const unsigned char *last8, uint64_t file_size, size_t *footer_len,
                  struct err *e);
int pq_footer_read(const char *name, const unsigned char *footer, size_t footer_len, uint64_t file_size,
                   struct pq_file *f, struct err *e);
void pq_file_free(struct pq_file *f);

/* Where a chunk's pages start: its dictionary page, if it has one, else its first data page. */
int64_t pq_chunk_start(const struct pq_chunk *k);

struct pq_page {
    int type;                  /* enum pq_page_type */
    int32_t uncompressed_size, compressed_size;
    int32_t num_values;        /* data and dictionary pages */
    int32_t encoding;          /* of the values */
    int32_t def_encoding;      /* v1: of the definition levels */
    int32_t num_nulls;         /* v2 */
    int32_t def_bytes, rep_bytes; /* v2: level bytes before the values, never compressed */
    bool v2_compressed;        /* v2: is_compressed (default true) */
};

/* Decodes the PageHeader at [p, end): *hdr_len gets its size. false with *why when it is bad. */
bool pq_page_read(const unsigned char *p, const unsigned char *end, struct pq_page *pg, size_t *hdr_len,
                  const char **why);

#endif
