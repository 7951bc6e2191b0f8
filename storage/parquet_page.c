/* parquet_page.c — codecs (Debian's snappy, libdeflate, zstd, lz4), the RLE/bit-packed hybrid, PLAIN, dictionary,
   BYTE_STREAM_SPLIT and DELTA_BINARY_PACKED values, and their conversion to float or double. */
#include "parquet_page.h"

#include <inttypes.h>
#include <libdeflate.h>
#include <limits.h>
#include <lz4.h>
#include <snappy-c.h>
#include <stdio.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "csv.h"
#include "parquet_meta.h"

static bool fail(const char **why, const char *msg)
{
    *why = msg;
    return false;
}

static const char *const wrong_size = "decompressed size differs from the page header's";

/* A gzip member (or a zlib stream) whole: libdeflate inflates a buffer of known size at about twice zlib's speed. */
static bool inflate_all(const unsigned char *src, size_t n, unsigned char *dst, size_t want, const char **why)
{
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d)
        return fail(why, "out of memory for gzip");
    enum libdeflate_result rc = n >= 2 && src[0] == 0x1f && src[1] == 0x8b
                                    ? libdeflate_gzip_decompress(d, src, n, dst, want, NULL)
                                    : libdeflate_zlib_decompress(d, src, n, dst, want, NULL);
    libdeflate_free_decompressor(d);
    if (rc == LIBDEFLATE_SUCCESS)
        return true;
    return fail(why, rc == LIBDEFLATE_BAD_DATA ? "gzip data is corrupt" : wrong_size);
}

bool pq_codec_known(int codec)
{
    return codec == PQ_UNCOMPRESSED || codec == PQ_SNAPPY || codec == PQ_GZIP || codec == PQ_ZSTD ||
           codec == PQ_LZ4_RAW;
}

bool pq_decompress_fits(int codec, const unsigned char *src, size_t n, size_t want, const char **why)
{
    size_t len;
    unsigned long long framed;
    switch (codec) {
    case PQ_SNAPPY: /* the stream starts with its length */
        if (snappy_uncompressed_length((const char *)src, n, &len) != SNAPPY_OK)
            return fail(why, "snappy data is corrupt");
        return len == want ? true : fail(why, wrong_size);
    case PQ_ZSTD: /* the frame's content size when written, else 32768:1, an RLE block's ratio */
        framed = ZSTD_getFrameContentSize(src, n);
        if (framed != ZSTD_CONTENTSIZE_UNKNOWN && framed != ZSTD_CONTENTSIZE_ERROR)
            return framed == want ? true : fail(why, wrong_size);
        return want / 32768 <= n ? true : fail(why, "a page header claims more bytes than zstd expands its page to");
    case PQ_GZIP: /* deflate's best ratio is 1032:1 */
        return want / 1032 <= n ? true : fail(why, "a page header claims more bytes than gzip expands its page to");
    case PQ_LZ4_RAW: /* lz4's is 255:1 */
        return want / 255 <= n + 1 ? true : fail(why, "a page header claims more bytes than lz4 expands its page to");
    default:
        return n == want ? true : fail(why, wrong_size);
    }
}

bool pq_decompress(int codec, const unsigned char *src, size_t n, unsigned char *dst, size_t want, const char **why)
{
    size_t len;
    switch (codec) {
    case PQ_UNCOMPRESSED:
        if (n != want)
            return fail(why, wrong_size);
        memcpy(dst, src, n);
        return true;
    case PQ_SNAPPY:
        if (snappy_uncompressed_length((const char *)src, n, &len) != SNAPPY_OK)
            return fail(why, "snappy data is corrupt");
        if (len != want)
            return fail(why, wrong_size);
        if (snappy_uncompress((const char *)src, n, (char *)dst, &len) != SNAPPY_OK || len != want)
            return fail(why, "snappy data is corrupt");
        return true;
    case PQ_GZIP:
        return inflate_all(src, n, dst, want, why);
    case PQ_ZSTD: {
        unsigned long long framed = ZSTD_getFrameContentSize(src, n);
        if (framed != ZSTD_CONTENTSIZE_UNKNOWN && framed != ZSTD_CONTENTSIZE_ERROR && framed != want)
            return fail(why, wrong_size);
        len = ZSTD_decompress(dst, want, src, n);
        if (ZSTD_isError(len))
            return fail(why, ZSTD_getErrorCode(len) == ZSTD_error_dstSize_tooSmall ? wrong_size
                                                                                    : "zstd data is corrupt");
        return len == want ? true : fail(why, wrong_size);
    }
    case PQ_LZ4_RAW: {
        if (n > INT_MAX || want > INT_MAX)
            return fail(why, "lz4 page too large");
        int got = LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)want);
        if (got < 0)
            return fail(why, "lz4 data is corrupt (or larger than the page header says)");
        return (size_t)got == want ? true : fail(why, wrong_size);
    }
    default:
        return fail(why, "unsupported codec");
    }
}

/* ULEB128 within [*p, end). */
static bool uleb(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        unsigned b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Bits [bit, bit + width) of the little-endian bit stream at p (width <= 64; the caller checked the bytes). */
static uint64_t bits_at(const unsigned char *p, uint64_t bit, unsigned width, const unsigned char *end)
{
    uint64_t v = 0;
    for (unsigned got = 0; got < width;) {
        const unsigned char *b = p + (bit >> 3);
        unsigned off = (unsigned)(bit & 7), take = 8 - off;
        if (take > width - got)
            take = width - got;
        unsigned byte = b < end ? *b : 0;
        v |= (uint64_t)((byte >> off) & ((1u << take) - 1)) << got;
        got += take;
        bit += take;
    }
    return v;
}

/* The RLE/bit-packed hybrid of one bit width, a run at a time. */
struct hybrid {
    const unsigned char *p, *end;
    unsigned width;
    uint64_t left;            /* values left in the current run */
    bool packed;
    uint64_t value;           /* an RLE run's value */
    const unsigned char *bits; /* a bit-packed run's bytes */
    uint64_t at;              /* values of the bit-packed run read so far */
};

static bool hybrid_run(struct hybrid *h, const char **why)
{
    uint64_t head;
    if (!uleb(&h->p, h->end, &head))
        return fail(why, "levels or indices end early");
    h->packed = head & 1;
    h->at = 0;
    if (h->packed) {
        uint64_t groups = head >> 1;
        if (groups == 0 || groups > (uint64_t)1 << 32 || groups > (uint64_t)(h->end - h->p) / (h->width ? h->width : 1) + 1)
            return fail(why, "a bit-packed run is longer than its page");
        h->left = groups * 8;
        h->bits = h->p;
        uint64_t bytes = groups * h->width;
        /* The last run may stop short of its padding: values past the bytes are an error when read. */
        h->p += bytes < (uint64_t)(h->end - h->p) ? bytes : (uint64_t)(h->end - h->p);
        return true;
    }
    h->left = head >> 1;
    if (h->left == 0)
        return fail(why, "an empty run");
    unsigned nbytes = (h->width + 7) / 8;
    if ((size_t)(h->end - h->p) < nbytes)
        return fail(why, "levels or indices end early");
    h->value = 0;
    for (unsigned i = 0; i < nbytes; i++)
        h->value |= (uint64_t)h->p[i] << (8 * i);
    h->p += nbytes;
    return true;
}

static bool hybrid_next(struct hybrid *h, uint64_t *v, const char **why)
{
    if (h->left == 0 && !hybrid_run(h, why))
        return false;
    h->left--;
    if (!h->packed) {
        *v = h->value;
        return true;
    }
    uint64_t bit = h->at++ * h->width;
    if ((bit + h->width + 7) / 8 > (uint64_t)(h->p - h->bits))
        return fail(why, "a bit-packed run ends early");
    *v = bits_at(h->bits, bit, h->width, h->p);
    return true;
}

bool pq_levels_defined(const unsigned char *p, size_t n, size_t n_values, size_t *first_null, const char **why)
{
    struct hybrid h = {.p = p, .end = p + n, .width = 1};
    *why = NULL;
    for (size_t i = 0; i < n_values;) {
        if (h.left == 0 && !hybrid_run(&h, why))
            return false;
        if (!h.packed && h.value == 1) { /* a run of defined values (the usual page): passed whole */
            uint64_t take = h.left < n_values - i ? h.left : n_values - i;
            h.left -= take;
            i += (size_t)take;
            continue;
        }
        uint64_t v;
        if (!hybrid_next(&h, &v, why))
            return false;
        if (v != 1) {
            *first_null = i;
            return false;
        }
        i++;
    }
    return true;
}

static unsigned type_bytes(int type)
{
    return type == PQ_INT32 || type == PQ_FLOAT ? 4 : type == PQ_INT64 || type == PQ_DOUBLE ? 8 : 0;
}

/* A 4- or 8-byte little-endian value: one load on a little-endian machine. */
static inline uint64_t load_le(const unsigned char *p, unsigned n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n == 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
#else
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
#endif
}

/* INT32 as int64 bits, sign and all; the others as they are. */
static uint64_t widen(int type, uint64_t v)
{
    return type == PQ_INT32 ? (uint64_t)(int64_t)(int32_t)(uint32_t)v : v;
}

/* Big-endian two's complement of w bytes (1..16), as an int64 when it fits. */
static bool load_be_decimal(const unsigned char *p, unsigned w, uint64_t *v)
{
    uint64_t x = p[0] & 0x80 ? UINT64_MAX : 0;
    unsigned skip = w > 8 ? w - 8 : 0;
    for (unsigned i = 0; i < skip; i++) /* bytes above the low 8 must be the sign's */
        if (p[i] != (unsigned char)x)
            return false;
    for (unsigned i = skip; i < w; i++)
        x = x << 8 | p[i];
    if (skip && ((x >> 63) != (uint64_t)(p[0] >> 7)))
        return false;
    *v = x;
    return true;
}

static bool decode_fixed(unsigned w, const unsigned char *p, size_t len, size_t n, uint64_t *raw, const char **why)
{
    if (len / w < n)
        return fail(why, "values end early");
    for (size_t i = 0; i < n; i++)
        if (!load_be_decimal(p + i * w, w, &raw[i]))
            return fail(why, "a DECIMAL beyond 64 bits");
    return true;
}

static bool decode_plain(int type, const unsigned char *p, size_t len, size_t n, uint64_t *raw, const char **why)
{
    if (type == PQ_BOOLEAN) {
        if (len < (n + 7) / 8)
            return fail(why, "values end early");
        for (size_t i = 0; i < n; i++)
            raw[i] = (p[i / 8] >> (i % 8)) & 1;
        return true;
    }
    unsigned w = type_bytes(type);
    if (!w)
        return fail(why, "unsupported physical type");
    if (len / w < n)
        return fail(why, "values end early");
    for (size_t i = 0; i < n; i++)
        raw[i] = widen(type, load_le(p + i * w, w));
    return true;
}

/* Values [at, at + n) of a bit-packed run of width w (<= 32) at bits, as one unaligned load each where
   8 bytes remain before end (the page's end: bits past the run are masked off). The caller checked the run's bytes. */
static void unpack(const unsigned char *bits, const unsigned char *end, unsigned w, uint64_t at, size_t n,
                   uint32_t *out)
{
    const uint64_t mask = ((uint64_t)1 << w) - 1;
    uint64_t bit = at * w;
    for (size_t i = 0; i < n; i++, bit += w) {
        const unsigned char *b = bits + (bit >> 3);
        out[i] = (uint32_t)((end - b >= 8 ? load_le(b, 8) >> (bit & 7) : bits_at(b, bit & 7, w, end)) & mask);
    }
}

/* One dictionary entry of esz (4 or 8) bytes to out: a constant size, so one move. */
static inline void put_entry(unsigned char *out, const unsigned char *entry, size_t esz)
{
    if (esz == 8)
        memcpy(out, entry, 8);
    else
        memcpy(out, entry, 4);
}

bool pq_decode_dict(const unsigned char *p, size_t len, size_t n, const unsigned char *dict, size_t dict_n,
                    size_t esz, unsigned char *out, size_t stride, const char **why)
{
    if (!dict)
        return fail(why, "dictionary-encoded values without a dictionary page");
    if (len < 1 || p[0] > 32)
        return fail(why, "bad bit width of dictionary indices");
    struct hybrid h = {.p = p + 1, .end = p + len, .width = p[0]};
    uint32_t idx[512];
    for (size_t i = 0; i < n;) {
        if (h.left == 0 && !hybrid_run(&h, why))
            return false;
        size_t take = h.left < n - i ? (size_t)h.left : n - i;
        if (!h.packed) { /* a run of one index: its entry, as many times */
            if (h.value >= dict_n)
                return fail(why, "dictionary index out of range");
            for (size_t j = 0; j < take; j++, out += stride)
                put_entry(out, dict + h.value * esz, esz);
        } else {
            if (take > sizeof idx / sizeof idx[0])
                take = sizeof idx / sizeof idx[0];
            if (((h.at + take) * h.width + 7) / 8 > (uint64_t)(h.p - h.bits))
                return fail(why, "a bit-packed run ends early");
            unpack(h.bits, h.end, h.width, h.at, take, idx);
            h.at += take;
            for (size_t j = 0; j < take; j++, out += stride) {
                if (idx[j] >= dict_n)
                    return fail(why, "dictionary index out of range");
                put_entry(out, dict + (size_t)idx[j] * esz, esz);
            }
        }
        h.left -= take;
        i += take;
    }
    return true;
}

static bool decode_split(int type, const unsigned char *p, size_t len, size_t n, uint64_t *raw, const char **why)
{
    unsigned w = type_bytes(type);
    if (!w)
        return fail(why, "BYTE_STREAM_SPLIT of an unsupported physical type");
    if (len / w != n || len % w)
        return fail(why, "BYTE_STREAM_SPLIT values do not fill their page");
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        for (unsigned b = 0; b < w; b++)
            v |= (uint64_t)p[b * n + i] << (8 * b);
        raw[i] = widen(type, v);
    }
    return true;
}

/* DELTA_BINARY_PACKED: blocks of miniblocks of bit-packed deltas from a first value, wrapping as the type does. */
static bool decode_delta(int type, const unsigned char *p, size_t len, size_t n, uint64_t *raw, const char **why)
{
    if (type != PQ_INT32 && type != PQ_INT64)
        return fail(why, "DELTA_BINARY_PACKED of a non-integer type");
    const unsigned char *end = p + len;
    uint64_t block, minis, total, zz;
    if (!uleb(&p, end, &block) || !uleb(&p, end, &minis) || !uleb(&p, end, &total) || !uleb(&p, end, &zz))
        return fail(why, "DELTA_BINARY_PACKED header ends early");
    if (block == 0 || block % 128 || minis == 0 || block % minis || (block / minis) % 32 || block > (1u << 20))
        return fail(why, "bad DELTA_BINARY_PACKED block sizes");
    if (total != n)
        return fail(why, "DELTA_BINARY_PACKED holds another number of values than its page");
    uint64_t per_mini = block / minis, v = zz >> 1 ^ -(zz & 1);
    size_t i = 0;
    if (n)
        raw[i++] = v;
    while (i < n) {
        uint64_t min_zz;
        if (!uleb(&p, end, &min_zz) || (uint64_t)(end - p) < minis)
            return fail(why, "DELTA_BINARY_PACKED block ends early");
        uint64_t min_delta = min_zz >> 1 ^ -(min_zz & 1);
        const unsigned char *widths = p;
        p += minis;
        for (uint64_t m = 0; m < minis && i < n; m++) {
            unsigned w = widths[m];
            if (w > 64)
                return fail(why, "bad DELTA_BINARY_PACKED bit width");
            uint64_t bytes = per_mini * w / 8;
            if (bytes > (uint64_t)(end - p))
                return fail(why, "DELTA_BINARY_PACKED miniblock ends early");
            for (uint64_t j = 0; j < per_mini && i < n; j++, i++) {
                v += min_delta + bits_at(p, j * w, w, p + bytes);
                raw[i] = type == PQ_INT32 ? widen(type, v & 0xffffffffu) : v;
            }
            p += bytes;
        }
    }
    return true;
}

bool pq_decode_values(int enc, const struct pq_column *col, const unsigned char *p, size_t len, size_t n,
                      uint64_t *raw, const char **why)
{
    const int type = col->type;
    if (type == PQ_FIXED_LEN_BYTE_ARRAY && enc == PQ_PLAIN)
        return decode_fixed((unsigned)col->type_length, p, len, n, raw, why);
    switch (enc) {
    case PQ_PLAIN: return decode_plain(type, p, len, n, raw, why);
    case PQ_BYTE_STREAM_SPLIT: return decode_split(type, p, len, n, raw, why);
    case PQ_DELTA_BINARY_PACKED: return decode_delta(type, p, len, n, raw, why);
    case PQ_PLAIN_DICTIONARY:
    case PQ_RLE_DICTIONARY: return fail(why, "dictionary indices in a dictionary page");
    default: return fail(why, "unsupported encoding");
    }
}

bool pq_plain_direct(const struct pq_column *col)
{
    return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && col->scale == 0 && type_bytes(col->type) != 0;
}

/* n values of type IN at p (packed, little-endian) as OUT, stride bytes apart at out. */
#define CONVERT_EACH(IN, OUT)                          \
    for (size_t i = 0; i < n; i++, out += stride) {    \
        IN v;                                          \
        memcpy(&v, p + i * sizeof v, sizeof v);        \
        OUT o = (OUT)v;                                \
        memcpy(out, &o, sizeof o);                     \
    }

bool pq_decode_plain_into(const struct pq_column *col, bool f32, const unsigned char *p, size_t len, size_t n,
                          unsigned char *out, size_t stride, const char **why)
{
    const unsigned w = type_bytes(col->type);
    if (len / w < n)
        return fail(why, "values end early");
    if (w == (f32 ? sizeof(float) : sizeof(double)) && (col->type == PQ_FLOAT || col->type == PQ_DOUBLE) &&
        stride == w) {
        memcpy(out, p, n * w); /* already the job's dtype, one column: the page is the rows */
        return true;
    }
    switch (col->type * 2 + f32) {
    case PQ_INT32 * 2: CONVERT_EACH(int32_t, double) break;
    case PQ_INT32 * 2 + 1: CONVERT_EACH(int32_t, float) break;
    case PQ_INT64 * 2: CONVERT_EACH(int64_t, double) break;
    case PQ_INT64 * 2 + 1: CONVERT_EACH(int64_t, float) break;
    case PQ_FLOAT * 2: CONVERT_EACH(float, double) break;
    case PQ_FLOAT * 2 + 1: CONVERT_EACH(float, float) break;
    case PQ_DOUBLE * 2: CONVERT_EACH(double, double) break;
    default: CONVERT_EACH(double, float) break;
    }
    return true;
}

static double as_double(int type, uint64_t v)
{
    switch (type) {
    case PQ_FLOAT: {
        float f;
        uint32_t b = (uint32_t)v;
        memcpy(&f, &b, sizeof f);
        return f;
    }
    case PQ_DOUBLE: {
        double d;
        memcpy(&d, &v, sizeof d);
        return d;
    }
    default: return (double)(int64_t)v;
    }
}

/* Integers go straight to float: through double they could round twice. */
static float as_float(int type, uint64_t v)
{
    if (type == PQ_INT32 || type == PQ_INT64 || type == PQ_BOOLEAN || type == PQ_FIXED_LEN_BYTE_ARRAY)
        return (float)(int64_t)v;
    return (float)as_double(type, v);
}

/* v / 10^scale as the decimal "<v>e-<scale>", through the CSV parser's correctly rounded conversion. */
static void put_scaled(int64_t v, int scale, bool f32, unsigned char *out)
{
    char text[48];
    int len = snprintf(text, sizeof text, "%" PRId64 "e-%d", v, scale);
    const char *end = text + len;
    if (f32) {
        float f = 0;
        csv_scan_f32(text, end, &f); /* always a number: digits, 'e', digits */
        memcpy(out, &f, sizeof f);
    } else {
        double d = 0;
        csv_scan_f64(text, end, &d);
        memcpy(out, &d, sizeof d);
    }
}

void pq_convert(const struct pq_column *col, bool f32, const uint64_t *raw, size_t n, unsigned char *out,
                size_t stride)
{
    const int type = col->type;
    if (col->scale > 0) { /* parquet_meta.c sets one on integers and decimals only */
        for (size_t i = 0; i < n; i++, out += stride)
            put_scaled((int64_t)raw[i], col->scale, f32, out);
        return;
    }
    for (size_t i = 0; i < n; i++, out += stride) {
        if (f32) {
            float f = as_float(type, raw[i]);
            memcpy(out, &f, sizeof f);
        } else {
            double d = as_double(type, raw[i]);
            memcpy(out, &d, sizeof d);
        }
    }
}
