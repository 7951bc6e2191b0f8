/* test_csv.c — the number parser is bit-identical to libc's strtod/strtof; the grammar rejects what is not a number. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"

static uint64_t bits64(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static uint32_t bits32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Parses s completely with both parsers and checks the bits against libc. */
static void check_exact(const char *s)
{
    const char *end = s + strlen(s);
    double d = 12345.0;
    float f = 12345.0f;
    cr_assert_eq(csv_scan_f64(s, end, &d), end, "csv_scan_f64 did not consume \"%s\"", s);
    cr_assert_eq(csv_scan_f32(s, end, &f), end, "csv_scan_f32 did not consume \"%s\"", s);
    double rd = strtod(s, NULL);
    float rf = strtof(s, NULL);
    cr_assert_eq(bits64(d), bits64(rd), "f64 \"%s\": got %.17g (0x%016" PRIx64 "), strtod %.17g", s, d,
                 bits64(d), rd);
    cr_assert_eq(bits32(f), bits32(rf), "f32 \"%s\": got %.9g (0x%08" PRIx32 "), strtof %.9g", s, (double)f,
                 bits32(f), (double)rf);
}

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64: a fixed seed makes the strings the same on every run */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A random decimal string: sign, integer digits, fraction digits, optional exponent. */
static void random_decimal(uint64_t *rng, char *buf, size_t cap, int max_digits, int max_exp)
{
    size_t n = 0;
    uint64_t r = rng_next(rng);
    if (r % 3 == 0)
        buf[n++] = '-';
    else if (r % 7 == 0)
        buf[n++] = '+';
    int idig = (int)(rng_next(rng) % (uint64_t)(max_digits + 1));
    int fdig = (int)(rng_next(rng) % (uint64_t)(max_digits + 1));
    if (idig == 0 && fdig == 0)
        idig = 1;
    for (int i = 0; i < idig && n + 2 < cap; i++)
        buf[n++] = (char)('0' + rng_next(rng) % 10);
    if (fdig > 0 || rng_next(rng) % 5 == 0) {
        buf[n++] = '.';
        for (int i = 0; i < fdig && n + 2 < cap; i++)
            buf[n++] = (char)('0' + rng_next(rng) % 10);
    }
    if (max_exp > 0 && rng_next(rng) % 2 == 0) {
        int ex = (int)(rng_next(rng) % (uint64_t)(2 * max_exp + 1)) - max_exp;
        n += (size_t)snprintf(buf + n, cap - n, "%c%d", rng_next(rng) % 2 ? 'e' : 'E', ex);
    }
    buf[n] = '\0';
}

Test(storage, f64_and_f32_match_libc_on_edge_cases)
{
    static const char *cases[] = {
        "0", "-0", "+0", "0.0", "-0.0", "0e0", "0e-999", "-0e999", "1", "-1", "0.1", "0.2", "0.3",
        "5.", ".5", "-.5", "1e-320", "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
        "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "1e308", "1e309",
        "-1e400", "9007199254740993", "9007199254740992", "9007199254740991", "18446744073709551615",
        "18446744073709551616", "2.2250738585072011e-308", "2.2250738585072014e-308",
        "0.000000000000000000000000000000000000000000001", "123456789012345678901234567890",
        "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899",
        "1e22", "1e23", "1e-22", "1e-23", "16777216", "16777217", "16777218", "3.4028235e38",
        "3.4028236e38", "1.17549435e-38", "1.4e-45", "7e-46", "1e10", "1e-10", "12.5", "38.9012",
        "-77.0345", "2016", "00000000000000000000000001.5", "1.00000000000000000000000000001",
        "0.99999999999999999999", "7.038531e-26", "1.18e-38", "8.589973e9", "1E5", "1e+5", "1e-5",
        "123456789e-8", "1234567890123456789", "12345678901234567890e-30",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_exact(cases[i]);
}

Test(storage, f32_is_not_rounded_twice_through_double)
{
    /*
     * Decimals just above a float32 midpoint whose nearest double IS the midpoint:
     * rounding via double lands on the tie and goes to even, strtof rounds up.
     * (Found with numpy/decimal; the reference is still strtof.)
     */
    static const char *cases[] = {
        "5174588203430176e-14", "2641106128692627e-14", "9565399551391602e-14", "3554195594787598e-14",
        "3298635292053223e-14", "3589451026916504e-14", "3198918628692627e-14", "51.74588203430176",
        "26.41106128692627", "95.65399551391602", "-35.54195594787598",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_exact(cases[i]);
}

Test(storage, f64_and_f32_match_libc_on_random_short_decimals)
{
    /* Mostly inside the fast paths: few digits, small exponents. */
    uint64_t rng = 20261122;
    char buf[128];
    for (int i = 0; i < 200000; i++) {
        random_decimal(&rng, buf, sizeof buf, 9, 25);
        check_exact(buf);
    }
}

Test(storage, f64_and_f32_match_libc_on_random_long_decimals)
{
    /* Many digits and wide exponents: the fallback, subnormals, overflow. */
    uint64_t rng = 42;
    char buf[128];
    for (int i = 0; i < 100000; i++) {
        random_decimal(&rng, buf, sizeof buf, 25, 340);
        check_exact(buf);
    }
}

Test(storage, f64_and_f32_match_libc_on_random_integers_near_mantissa_limits)
{
    uint64_t rng = 7;
    char buf[64];
    for (int i = 0; i < 100000; i++) {
        uint64_t base = i % 2 ? (UINT64_C(1) << 53) : (UINT64_C(1) << 24);
        uint64_t v = base - 1000 + rng_next(&rng) % 2000;
        int ex = (int)(rng_next(&rng) % 45) - 22;
        snprintf(buf, sizeof buf, "%" PRIu64 "e%d", v, ex);
        check_exact(buf);
    }
}

Test(storage, scan_rejects_text_that_is_not_a_number)
{
    static const char *bad[] = {"", ".", "-", "+", "e5", ".e5", "1e", "1e+", "nan", "NaN", "inf", "-inf",
                                "Infinity", "x1", "+-1", "--1", " 1", "\"1\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double d;
        float f;
        const char *s = bad[i], *end = s + strlen(s);
        cr_assert_null(csv_scan_f64(s, end, &d), "\"%s\" accepted as f64", s);
        cr_assert_null(csv_scan_f32(s, end, &f), "\"%s\" accepted as f32", s);
    }
}

Test(storage, scan_stops_at_the_end_of_the_number)
{
    /* hex and trailing garbage: the number ends early, so the row loop reports the field */
    static const char *partial[] = {"0x10", "1.2.3", "12abc", "1e5x"};
    for (size_t i = 0; i < sizeof partial / sizeof *partial; i++) {
        double d;
        const char *s = partial[i], *end = s + strlen(s);
        const char *q = csv_scan_f64(s, end, &d);
        cr_assert(q != NULL && q < end, "\"%s\" should parse only a prefix", s);
    }
}

Test(storage, scan_never_reads_past_the_buffer_end)
{
    /* "1.5e3" cut after "1.5": the bytes beyond end must not be taken as an exponent */
    const char *s = "1.5e3";
    double d;
    cr_assert_eq(csv_scan_f64(s, s + 3, &d), s + 3);
    cr_assert_eq(d, 1.5);
}

/*
 * The row loop has its own fast path (no bounds checks, no libc): a buffer of
 * random fields in every shape it must hand over to the careful scanner (signs,
 * exponents, blanks, long digit runs, CRLF, an unterminated last line), parsed
 * as rows and compared field by field with strtod/strtof.
 */
static void check_rows_against_libc(int with_midpoints, int crlf, int last_newline)
{
    enum { NC = 5, ROWS = 4000 };
    static const char *midpoints[] = {"51.74588203430176", "26.41106128692627", "-35.54195594787598",
                                      "95.65399551391602", "5174588203430176e-14"};
    uint64_t rng = 1234 + (uint64_t)with_midpoints * 7 + (uint64_t)crlf;
    size_t cap = (size_t)ROWS * NC * 140, n = 0;
    char *text = malloc(cap);
    char (*fields)[128] = malloc((size_t)ROWS * NC * sizeof *fields);
    cr_assert(text && fields);
    for (int r = 0; r < ROWS; r++) {
        for (int c = 0; c < NC; c++) {
            char *fld = fields[r * NC + c];
            uint64_t kind = rng_next(&rng) % 10;
            if (with_midpoints && kind == 0)
                snprintf(fld, 128, "%s", midpoints[rng_next(&rng) % 5]);
            else if (kind < 6)
                random_decimal(&rng, fld, 128, 8, 0);  /* the fast path's shape */
            else if (kind < 8)
                random_decimal(&rng, fld, 128, 12, 30); /* exponents, long runs */
            else
                random_decimal(&rng, fld, 128, 25, 300);
            const char *pad = rng_next(&rng) % 13 == 0 ? " " : "";
            n += (size_t)snprintf(text + n, cap - n, "%s%s%s%s", pad, fld, pad, c + 1 < NC ? "," : "");
        }
        if (r + 1 < ROWS || last_newline)
            n += (size_t)snprintf(text + n, cap - n, crlf ? "\r\n" : "\n");
    }
    /* exactly n bytes, so a sanitizer sees any read past the end */
    char *exact = malloc(n);
    cr_assert_not_null(exact);
    memcpy(exact, text, n);
    free(text);
    text = exact;
    for (int f32 = 0; f32 < 2; f32++) {
        struct csv_format f = {.name = "rows.csv", .header = DATASET_HEADER_NO, .dtype = f32 ? STORE_F32 : STORE_F64};
        struct csv_layout lay;
        struct err e = {0};
        uint64_t rows;
        cr_assert_eq(csv_probe(&f, text, n, &lay, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(csv_count_rows(&f, &lay, text, n, &rows, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(rows, ROWS);
        void *dst = malloc((size_t)ROWS * NC * sizeof(double));
        cr_assert_eq(csv_parse_rows(&f, &lay, text, n, dst, rows, &e), ERR_OK, "%s", e.msg);
        for (size_t i = 0; i < (size_t)ROWS * NC; i++) {
            const char *s = fields[i];
            if (f32)
                cr_assert_eq(bits32(((float *)dst)[i]), bits32(strtof(s, NULL)), "f32 field %zu \"%s\"", i, s);
            else
                cr_assert_eq(bits64(((double *)dst)[i]), bits64(strtod(s, NULL)), "f64 field %zu \"%s\"", i, s);
        }
        free(dst);
    }
    free(fields);
    free(text);
}

Test(storage, row_parser_matches_libc_on_random_fields)
{
    check_rows_against_libc(0, 0, 1);
}

Test(storage, row_parser_f32_rounds_once_on_midpoint_fields)
{
    check_rows_against_libc(1, 0, 1);
}

Test(storage, row_parser_matches_libc_with_crlf_and_no_final_newline)
{
    check_rows_against_libc(1, 1, 0);
}

Test(storage, row_parser_reports_a_bad_field_on_the_fast_path)
{
    /* "1.5x" looks like the fast path's shape until its last byte */
    const char *text = "1.5,2.25\n3.75,1.5x\n4,5\n";
    struct csv_format f = {.name = "bad.csv", .header = DATASET_HEADER_NO, .dtype = STORE_F64};
    struct csv_layout lay;
    struct err e = {0};
    uint64_t rows;
    size_t n = strlen(text);
    cr_assert_eq(csv_probe(&f, text, n, &lay, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(csv_count_rows(&f, &lay, text, n, &rows, &e), ERR_OK, "%s", e.msg);
    double dst[6];
    cr_assert_eq(csv_parse_rows(&f, &lay, text, n, dst, rows, &e), ERR_INVALID_DATA);
    cr_assert_not_null(strstr(e.msg, "bad.csv: line 2, column 2: not a number"), "%s", e.msg);
}
