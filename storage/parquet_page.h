/* parquet_page.h — internal to storage/: a page's bytes into values: codecs, levels, encodings. */
#ifndef TRAIND_STORAGE_PARQUET_PAGE_H
#define TRAIND_STORAGE_PARQUET_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "parquet_meta.h"

/*
 * Values travel as raw 64-bit patterns of their physical type (INT32 sign-extended,
 * FLOAT in the low 32 bits, BOOLEAN 0 or 1, a FIXED_LEN_BYTE_ARRAY decimal as the int64 it
 * holds: one beyond 64 bits is an error) until pq_convert writes them in the job's
 * dtype. Every function returns false with *why (a static string) on bad input.
 */

/* Decompresses n bytes at src into exactly want bytes at dst; any other size is an error. */
bool pq_decompress(int codec, const unsigned char *src, size_t n, unsigned char *dst, size_t want, const char **why);

/*
 * Whether n bytes at src can decompress to want bytes: the size a snappy or zstd stream
 * declares, or the codec's largest ratio. Checked before a page's room is set aside, so that a
 * header cannot have gigabytes reserved for a page of a few bytes.
 */
bool pq_decompress_fits(int codec, const unsigned char *src, size_t n, size_t want, const char **why);

/* True when the codec is one pq_decompress knows. */
bool pq_codec_known(int codec);

/*
 * Definition levels of max level 1 in RLE/bit-packed hybrid form ([p, p + n)): n_values
 * levels, each 1. *first_null gets the index of the first 0 (then false, *why NULL).
 */
bool pq_levels_defined(const unsigned char *p, size_t n, size_t n_values, size_t *first_null, const char **why);

/* n values of column col's physical type in encoding `enc` (not a dictionary's) from [p, p + len) into raw. */
bool pq_decode_values(int enc, const struct pq_column *col, const unsigned char *p, size_t len, size_t n,
                      uint64_t *raw, const char **why);

/*
 * Dictionary-encoded values (PLAIN_DICTIONARY, RLE_DICTIONARY: a bit width, then indices in the
 * RLE/bit-packed hybrid) from [p, p + len): n entries of dict (dict_n of esz bytes, 4 or 8: the
 * dictionary already written in the job's dtype) copied `stride` bytes apart to out. An index
 * out of range, or no dictionary (dict NULL), is an error.
 */
bool pq_decode_dict(const unsigned char *p, size_t len, size_t n, const unsigned char *dict, size_t dict_n,
                    size_t esz, unsigned char *out, size_t stride, const char **why);

/*
 * PLAIN values written straight in the job's dtype, without the raw patterns in between (a copy
 * of the page when it is the rows already): for the columns pq_plain_direct accepts (INT32, INT64,
 * FLOAT, DOUBLE without a scale); the others go through pq_decode_values and pq_convert.
 */
bool pq_plain_direct(const struct pq_column *col);
bool pq_decode_plain_into(const struct pq_column *col, bool f32, const unsigned char *p, size_t len, size_t n,
                          unsigned char *out, size_t stride, const char **why);

/*
 * Writes raw values of column col as float (f32) or double, `stride` bytes apart. A scale
 * (integers and decimals): v / 10^scale, rounded once, exactly as the CSV parser reads the
 * same decimal.
 */
void pq_convert(const struct pq_column *col, bool f32, const uint64_t *raw, size_t n, unsigned char *out,
                size_t stride);

#endif
