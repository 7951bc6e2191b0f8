/*
 * fuzz_csv.c — the CSV parser (storage/csv.c) over arbitrary bytes. The first byte picks the
 * format (header mode, dtype, label column, and how wrong the row count a shards file gives
 * is); the rest is the partition, in a buffer of exactly its size, as a download is.
 * Invariants: every row and every parsed field takes at least one byte and a separator, so
 * rows, and rows x columns once parsed, are at most (len + 1) / 2 (columns: len + 1); the row count agrees between csv_measure and csv_count_rows; the parser
 * accepts exactly the measured count and refuses any other without writing past it; a number
 * csv_scan_* reads is the one strtod/strtof reads from the same bytes, bit for bit.
 */
#include <math.h>
#include <string.h>

#include "csv.h"
#include "fuzz.h"

/* csv_scan_* against libc on the longest number at the start of [p, end). */
static void check_scan(const char *p, const char *end)
{
    double d;
    float f;
    const char *q = csv_scan_f64(p, end, &d);
    const char *qf = csv_scan_f32(p, end, &f);
    FUZZ_CHECK(q == qf, "csv_scan_f64 and csv_scan_f32 end at different bytes");
    if (!q)
        return;
    FUZZ_CHECK(q > p && q <= end, "a number of %td bytes", q - p);
    size_t n = (size_t)(q - p);
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    char *e1, *e2;
    double ld = strtod(s, &e1);
    float lf = strtof(s, &e2);
    FUZZ_CHECK(e1 == s + n && e2 == s + n, "libc reads %td of the %zu bytes csv_scan read", e1 - s, n);
    FUZZ_CHECK(memcmp(&ld, &d, sizeof d) == 0, "csv_scan_f64 gives %.17g, strtod %.17g", d, ld);
    FUZZ_CHECK(memcmp(&lf, &f, sizeof f) == 0, "csv_scan_f32 gives %.9g, strtof %.9g", (double)f, (double)lf);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t opt = data[0];
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    check_scan(buf, buf + len);

    static const enum dataset_header headers[] = {DATASET_HEADER_AUTO, DATASET_HEADER_YES, DATASET_HEADER_NO,
                                                  DATASET_HEADER_AUTO};
    struct csv_format f = {
        .name = "fuzz.csv",
        .header = headers[opt & 3],
        .dtype = opt & 4 ? STORE_F32 : STORE_F64,
        .label = (opt >> 3) & 3,
        .ncols = 0,
    };
    int wrong_count = (opt >> 5) % 3 - 1;   /* -1, 0 or +1: what a stale shards file may say */
    struct csv_layout lay;
    uint64_t rows;
    struct err e = {0};
    if (csv_measure(&f, buf, len, &lay, &rows, &e) != ERR_OK)
        return 0;
    FUZZ_CHECK(lay.data_off <= len, "data starts at %zu of %zu bytes", lay.data_off, len);
    if (rows == 0)
        return 0;
    FUZZ_CHECK(lay.ncols > 0, "%llu rows of no column", (unsigned long long)rows);
    /* A row is a non-empty line: at least one byte and a newline (the last may lack it); the
       first line has a column more than it has commas. */
    FUZZ_CHECK(rows <= (len + 1) / 2 && lay.ncols <= len + 1, "%llu rows, %zu columns in %zu bytes",
               (unsigned long long)rows, lay.ncols, len);

    uint64_t counted;
    FUZZ_CHECK(csv_count_rows(&f, &lay, buf, len, &counted, &e) == ERR_OK && counted == rows,
               "csv_count_rows disagrees with csv_measure: %s", e.msg);

    size_t esz = f.dtype == STORE_F32 ? sizeof(float) : sizeof(double);
    char *dst = malloc((size_t)rows * lay.ncols * esz);
    int rc = csv_parse_rows(&f, &lay, buf, len, dst, rows, &e);
    free(dst);
    if (f.label >= lay.ncols) {
        FUZZ_CHECK(rc == ERR_INVALID_ARG, "label %zu of %zu columns: rc %d", f.label, lay.ncols, rc);
        return 0;
    }
    /* A later line may still hold a bad field: the only other answer allowed. */
    FUZZ_CHECK(rc == ERR_OK || rc == ERR_INVALID_DATA, "rc %d: %s", rc, e.msg);
    FUZZ_CHECK(rc != ERR_OK || rows * lay.ncols <= (len + 1) / 2, "%llu rows x %zu columns parsed from %zu bytes",
               (unsigned long long)rows, lay.ncols, len);
    if (rc != ERR_OK || !wrong_count)
        return 0;
    /* The destination is sized for what the shards file claims: never written past. */
    uint64_t claimed = rows + (uint64_t)(int64_t)wrong_count;
    dst = malloc(claimed ? (size_t)claimed * lay.ncols * esz : 1);
    rc = csv_parse_rows(&f, &lay, buf, len, dst, claimed, &e);
    FUZZ_CHECK(rc == ERR_INVALID_DATA, "%llu rows parsed as %llu", (unsigned long long)rows,
               (unsigned long long)claimed);
    free(dst);
    return 0;
}
