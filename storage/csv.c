/* csv.c — numeric CSV: exact decimal-to-float conversion (Clinger fast path + libc fallback) and the row loop. */
#include "csv.h"

#include <stdlib.h>
#include <string.h>

/* Powers of ten exactly representable: 10^22 < 2^53 * 2^22 (5^22 < 2^53). */
static const double p10_f64[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

#define FAST_F64_MANT (UINT64_C(1) << 53)
#define MAX_SIG_DIGITS 19 /* 10^19 - 1 < 2^64 */

static inline int is_digit(char c)
{
    return (unsigned)(c - '0') < 10u;
}

/* A decimal as value = (neg ? -1 : 1) * m * 10^exp, exact unless nonzero digits were dropped. */
struct decimal {
    uint64_t m;
    int64_t exp;
    int neg;
    int exact;
};

static inline __attribute__((always_inline)) const char *scan_decimal(const char *p, const char *end,
                                                                      struct decimal *d)
{
    uint64_t m = 0;
    int64_t exp = 0;
    int nd = 0, exact = 1, any = 0, neg = 0;
    if (p < end && (*p == '-' || *p == '+')) {
        neg = *p == '-';
        p++;
    }
    for (; p < end && is_digit(*p); p++) {
        unsigned dig = (unsigned)(*p - '0');
        any = 1;
        if (nd < MAX_SIG_DIGITS) {
            m = m * 10 + dig;
            nd += m != 0; /* leading zeros are not significant */
        } else {
            exp++;
            exact &= dig == 0;
        }
    }
    if (p < end && *p == '.') {
        p++;
        for (; p < end && is_digit(*p); p++) {
            unsigned dig = (unsigned)(*p - '0');
            any = 1;
            if (nd < MAX_SIG_DIGITS) {
                m = m * 10 + dig;
                nd += m != 0;
                exp--;
            } else {
                exact &= dig == 0;
            }
        }
    }
    if (!any)
        return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '-' || *p == '+')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || !is_digit(*p))
            return NULL;
        int64_t ev = 0;
        for (; p < end && is_digit(*p); p++)
            if (ev < 1000000) /* saturate: anything this large is 0 or inf either way */
                ev = ev * 10 + (*p - '0');
        exp += eneg ? -ev : ev;
    }
    d->m = m;
    d->exp = exp;
    d->neg = neg;
    d->exact = exact;
    return p;
}

/*
 * libc converts what the fast path cannot; the token was validated by scan_decimal,
 * so strtod reads exactly [s, e). Returns 0 only when a long token cannot be copied.
 */
static __attribute__((noinline)) int slow_convert(const char *s, const char *e, int f32, double *d, float *f)
{
    char small[128];
    size_t n = (size_t)(e - s);
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (f32)
        *f = strtof(buf, NULL);
    else
        *d = strtod(buf, NULL);
    if (buf != small)
        free(buf);
    return 1;
}

static inline __attribute__((always_inline)) const char *scan_f64(const char *p, const char *end, double *out)
{
    struct decimal d;
    const char *q = scan_decimal(p, end, &d);
    if (!q)
        return NULL;
    if (d.m == 0) {
        *out = d.neg ? -0.0 : 0.0;
        return q;
    }
    if (d.exact && d.m < FAST_F64_MANT && d.exp >= -22 && d.exp <= 22) {
        /* Both operands exact, one correctly rounded operation: the correctly rounded result. */
        double v = (double)d.m;
        v = d.exp < 0 ? v / p10_f64[-d.exp] : v * p10_f64[d.exp];
        *out = d.neg ? -v : v;
        return q;
    }
    return slow_convert(p, q, 0, out, NULL) ? q : NULL;
}

/*
 * The correctly rounded double v of a decimal x gives the correctly rounded float
 * unless v is exactly halfway between two floats: every such midpoint is a double,
 * so were x and v on opposite sides of one, the midpoint would be nearer to x than
 * v is. Only then (rare) is rounding twice unsafe, and libc decides.
 * v is a normal float here (1e-22 .. 9e37), so the midpoint test is on its low 29 bits.
 */
static inline int f32_ambiguous(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return (b & 0x1FFFFFFFu) == 0x10000000u;
}

static inline __attribute__((always_inline)) const char *scan_f32(const char *p, const char *end, float *out)
{
    struct decimal d;
    const char *q = scan_decimal(p, end, &d);
    if (!q)
        return NULL;
    if (d.m == 0) {
        *out = d.neg ? -0.0f : 0.0f;
        return q;
    }
    if (d.exact && d.m < FAST_F64_MANT && d.exp >= -22 && d.exp <= 22) {
        double v = (double)d.m;
        v = d.exp < 0 ? v / p10_f64[-d.exp] : v * p10_f64[d.exp];
        if (!f32_ambiguous(v)) {
            *out = (float)(d.neg ? -v : v);
            return q;
        }
    }
    return slow_convert(p, q, 1, NULL, out) ? q : NULL;
}

const char *csv_scan_f64(const char *p, const char *end, double *out)
{
    return scan_f64(p, end, out);
}

const char *csv_scan_f32(const char *p, const char *end, float *out)
{
    return scan_f32(p, end, out);
}

static inline const char *skip_blank(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* End of the line starting at p, not counting a "\r" before the "\n". */
static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    if (le > p && le[-1] == '\r')
        le--;
    return le;
}

/* The start of the next line after the one starting at p (end when there is none). */
static const char *next_line(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl + 1 : end;
}

static int is_empty_line(const char *p, const char *end)
{
    return line_end(p, end) == p;
}

static size_t count_fields(const char *p, const char *le)
{
    size_t n = 1;
    for (; p < le; p++)
        n += *p == ',';
    return n;
}

static int ragged(const struct csv_format *f, uint64_t line, size_t got, size_t want, struct err *e)
{
    size_t col = (got < want ? got : want) + 1;
    return err_set(e, ERR_INVALID_DATA, "%s: line %llu, column %zu: %zu fields, expected %zu", f->name,
                   (unsigned long long)line, col, got, want);
}

static int not_a_number(const struct csv_format *f, uint64_t line, size_t col, struct err *e)
{
    return err_set(e, ERR_INVALID_DATA, "%s: line %llu, column %zu: not a number", f->name,
                   (unsigned long long)line, col);
}

/* The first non-empty line (past a byte order mark) and its number; NULL when there is none. */
static const char *first_line(const char *buf, size_t len, uint64_t *line)
{
    const char *p = buf, *end = buf + len;
    *line = 1;
    /* A UTF-8 byte order mark (spreadsheet exports) is not part of the first field. */
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    while (p < end && is_empty_line(p, end)) {
        p = next_line(p, end);
        ++*line;
    }
    return p < end ? p : NULL;
}

/* The field starting at fs on a line ending at le: [*a, *b) without the blanks around it; returns its end. */
static const char *trimmed_field(const char *fs, const char *le, const char **a, const char **b)
{
    const char *fe = memchr(fs, ',', (size_t)(le - fs));
    if (!fe)
        fe = le;
    *a = skip_blank(fs, fe);
    *b = fe;
    while (*b > *a && ((*b)[-1] == ' ' || (*b)[-1] == '\t'))
        --*b;
    return fe;
}

int csv_probe(const struct csv_format *f, const char *buf, size_t len, struct csv_layout *lay, struct err *e)
{
    const char *end = buf + len;
    uint64_t line;
    const char *p = first_line(buf, len, &line);
    if (!p)
        return err_set(e, ERR_INVALID_DATA, "%s: line 1, column 1: empty file", f->name);
    const char *le = line_end(p, end);
    size_t ncols = 0;
    int all_numbers = 1;
    for (const char *fs = p;;) {
        const char *a, *b, *fe = trimmed_field(fs, le, &a, &b);
        double v;
        if (csv_scan_f64(a, b, &v) != b || a == b)
            all_numbers = 0;
        ncols++;
        if (fe == le)
            break;
        fs = fe + 1;
    }
    if (f->ncols && ncols != f->ncols)
        return ragged(f, line, ncols, f->ncols, e);
    lay->ncols = ncols;
    lay->has_header = f->header == DATASET_HEADER_YES || (f->header == DATASET_HEADER_AUTO && !all_numbers);
    lay->data_off = (size_t)((lay->has_header ? next_line(p, end) : p) - buf);
    lay->data_line = lay->has_header ? line + 1 : line;
    return ERR_OK;
}

/* Non-empty lines after the header. */
static uint64_t data_lines(const struct csv_layout *lay, const char *buf, size_t len)
{
    const char *p = buf + lay->data_off, *end = buf + len;
    uint64_t n = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t l = (size_t)(le - p);
        n += !(l == 0 || (l == 1 && *p == '\r'));
        p = nl ? nl + 1 : end;
    }
    return n;
}

int csv_count_rows(const struct csv_format *f, const struct csv_layout *lay, const char *buf, size_t len,
                   uint64_t *rows, struct err *e)
{
    uint64_t n = data_lines(lay, buf, len);
    if (n == 0)
        return err_set(e, ERR_INVALID_DATA, "%s: line %llu, column 1: header but no rows", f->name,
                       (unsigned long long)lay->data_line);
    *rows = n;
    return ERR_OK;
}

int csv_measure(const struct csv_format *f, const char *buf, size_t len, struct csv_layout *lay, uint64_t *rows,
                struct err *e)
{
    *rows = 0;
    uint64_t line;
    if (!first_line(buf, len, &line)) {
        *lay = (struct csv_layout){.data_off = len, .data_line = line};
        return ERR_OK;
    }
    int rc = csv_probe(f, buf, len, lay, e);
    if (rc == ERR_OK)
        *rows = data_lines(lay, buf, len);
    return rc;
}

/* Destination column of CSV column c: the label first, the rest in order. */
static inline size_t out_col(size_t c, size_t label)
{
    return c < label ? c + 1 : c == label ? 0 : c;
}

/*
 * Appends the digits at p to *m and counts them in *nd (leading zeros too); NULL
 * past 19 digits, where *m may have wrapped. No bounds check: the caller knows a
 * '\n' follows. A plain loop beats eight-byte SWAR here: the next field's start
 * then does not wait on a chain of multiplies, and these runs are short.
 */
static inline __attribute__((always_inline)) const char *fast_digits(const char *p, uint64_t *m, unsigned *nd)
{
    const char *s = p;
    uint64_t x = *m;
    unsigned d;
    while ((d = (unsigned)(unsigned char)*p - '0') < 10) {
        x = x * 10 + d;
        p++;
    }
    *m = x;
    *nd += (unsigned)(p - s);
    return *nd > MAX_SIG_DIGITS ? NULL : p;
}

enum field_end { FIELD_COMMA, FIELD_EOL, FIELD_BAD };

/*
 * The common field, "[-]digits[.digits]" followed by ',' or a line end, read with
 * no bounds check per byte: p is before last_nl, the buffer's last '\n', so every
 * loop stops there at the latest. Returns the byte after the number, or NULL for
 * anything else (a '+', an exponent, blanks, many digits, the unterminated last
 * line), which the careful scanner then reads again from the start of the field.
 */
static inline __attribute__((always_inline)) const char *fast_field(const char *p, const char *last_nl, int f32,
                                                                    void *out, enum field_end *fe)
{
    if (p >= last_nl)
        return NULL;
    int neg = *p == '-';
    p += neg;
    uint64_t m = 0;
    unsigned nd = 0;
    if (!(p = fast_digits(p, &m, &nd)))
        return NULL;
    unsigned ni = nd;
    if (*p == '.' && !(p = fast_digits(p + 1, &m, &nd)))
        return NULL;
    unsigned nf = nd - ni;
    if (nd == 0 || m >= FAST_F64_MANT)
        return NULL;
    if (*p == ',')
        *fe = FIELD_COMMA;
    else if (*p == '\n' || (*p == '\r' && p[1] == '\n')) /* p < last_nl here: p[1] exists */
        *fe = FIELD_EOL;
    else
        return NULL;
    /* m < 2^53 and 10^nf (nf <= 19) are exact: one correctly rounded division (Clinger). */
    double v = (double)m;
    if (nf)
        v /= p10_f64[nf];
    if (f32) {
        if (f32_ambiguous(v))
            return NULL;
        *(float *)out = (float)(neg ? -v : v);
    } else {
        *(double *)out = neg ? -v : v;
    }
    return p;
}

/* A field the careful way (blanks, exponents, libc for long digits): *pp moves to the separator. */
static __attribute__((noinline)) enum field_end slow_field(const char **pp, const char *end, int f32, void *out)
{
    const char *p = skip_blank(*pp, end);
    const char *q = f32 ? scan_f32(p, end, out) : scan_f64(p, end, out);
    if (!q)
        return FIELD_BAD;
    p = skip_blank(q, end);
    *pp = p;
    if (p < end && *p == ',')
        return FIELD_COMMA;
    if (p == end || *p == '\n' || (*p == '\r' && (p + 1 == end || p[1] == '\n')))
        return FIELD_EOL;
    return FIELD_BAD;
}

static inline __attribute__((always_inline)) int parse_rows_t(const struct csv_format *f,
                                                              const struct csv_layout *lay, const char *buf,
                                                              size_t len, void *dst, uint64_t rows, int f32,
                                                              struct err *e)
{
    const char *p = buf + lay->data_off, *end = buf + len;
    const char *last_nl = len ? memrchr(buf, '\n', len) : NULL;
    const size_t nc = lay->ncols, label = f->label, esz = f32 ? sizeof(float) : sizeof(double);
    uint64_t line = lay->data_line, r = 0;
    char *row = dst;
    while (p < end) {
        if (*p == '\n') {
            p++;
            line++;
            continue;
        }
        if (*p == '\r' && (p + 1 == end || p[1] == '\n')) {
            p += p + 1 == end ? 1 : 2;
            line++;
            continue;
        }
        if (r == rows)
            return err_set(e, ERR_INVALID_DATA, "%s: line %llu: more than the %llu rows expected", f->name,
                           (unsigned long long)line, (unsigned long long)rows);
        const char *ls = p;
        for (size_t c = 0;; c++) {
            if (c == nc)
                return ragged(f, line, count_fields(ls, line_end(ls, end)), nc, e);
            void *out = row + out_col(c, label) * esz;
            enum field_end fe;
            const char *q = last_nl ? fast_field(p, last_nl, f32, out, &fe) : NULL;
            if (q)
                p = q;
            else if ((fe = slow_field(&p, end, f32, out)) == FIELD_BAD)
                return not_a_number(f, line, c + 1, e);
            if (fe == FIELD_COMMA) {
                p++;
                continue;
            }
            if (c + 1 != nc)
                return ragged(f, line, c + 1, nc, e);
            break;
        }
        if (p < end)
            p += *p == '\r' ? (p + 1 == end ? 1 : 2) : 1;
        line++;
        r++;
        row += nc * esz;
    }
    if (r != rows)
        return err_set(e, ERR_INVALID_DATA, "%s: %llu rows, %llu expected", f->name, (unsigned long long)r,
                       (unsigned long long)rows);
    return ERR_OK;
}

/*
 * Packs rows of every column (label first) into rows of the selected ones, in place. A row
 * goes through tmp: its own columns may be asked for in any order. It lands before the next
 * rows' values (it is narrower), so none is overwritten before it is read.
 */
static int select_columns(const struct csv_format *f, size_t ncols, size_t esz, char *rows, uint64_t n,
                          struct err *e)
{
    const size_t in_stride = ncols * esz, out_stride = f->n_cols * esz;
    char *tmp = malloc(out_stride ? out_stride : 1);
    if (!tmp)
        return err_set(e, ERR_NOMEM, "%s: out of memory", f->name);
    for (uint64_t r = 0; r < n; r++) {
        const char *src = rows + r * in_stride;
        for (size_t j = 0; j < f->n_cols; j++)
            memcpy(tmp + j * esz, src + out_col(f->cols[j], f->label) * esz, esz);
        memcpy(rows + r * out_stride, tmp, out_stride);
    }
    free(tmp);
    return ERR_OK;
}

int csv_parse_rows(const struct csv_format *f, const struct csv_layout *lay, const char *buf, size_t len,
                   void *dst, uint64_t rows, struct err *e)
{
    if (f->label >= lay->ncols)
        return err_set(e, ERR_INVALID_ARG, "%s: label column %zu, but rows have %zu columns", f->name,
                       f->label, lay->ncols);
    int rc = f->dtype == STORE_F32 ? parse_rows_t(f, lay, buf, len, dst, rows, 1, e)
                                   : parse_rows_t(f, lay, buf, len, dst, rows, 0, e);
    if (rc == ERR_OK && f->cols)
        rc = select_columns(f, lay->ncols, f->dtype == STORE_F32 ? sizeof(float) : sizeof(double), dst, rows, e);
    return rc;
}

bool csv_column_named(const char *buf, size_t len, const char *name, size_t *col)
{
    uint64_t line;
    const char *p = first_line(buf, len, &line), *end = buf + len;
    if (!p)
        return false;
    const char *le = line_end(p, end);
    size_t want = strlen(name);
    for (size_t c = 0;; c++) {
        const char *a, *b, *fe = trimmed_field(p, le, &a, &b);
        if (b - a >= 2 && *a == '"' && b[-1] == '"') {
            a++;
            b--;
        }
        if ((size_t)(b - a) == want && memcmp(a, name, want) == 0) {
            *col = c;
            return true;
        }
        if (fe == le)
            return false;
        p = fe + 1;
    }
}
