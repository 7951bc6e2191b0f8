/* be_cpu_nn_loops.h — the CPU loops of activations, softmax and the classification losses for
 * one element type; be_cpu_nn.c includes it per dtype with T and SFX(name) defined.
 * Arithmetic is in double and rounded once to T. */

/* out = f(a) over one strided run. */
static void SFX(act_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *o = (T *)pp[0];
    const T *a = (const T *)pp[1];
    int64_t so = bst[0] / (int64_t)sizeof(T), sa = bst[1] / (int64_t)sizeof(T);
#define ACT_LOOP(EXPR)                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                  \
        double x = (double)a[i * sa];                                                  \
        o[i * so] = (T)(EXPR);                                                         \
    }
    switch ((enum be_act)c->op) {
    case BE_ACT_RELU:   /* torch's threshold: x <= 0 ? 0 : x (NaN stays NaN); in T, branch-free */
        if (so == 1 && sa == 1)
            for (int64_t i = 0; i < n; i++)
                o[i] = a[i] <= 0 ? (T)0 : a[i];
        else
            for (int64_t i = 0; i < n; i++) {
                T x = a[i * sa];
                o[i * so] = x <= 0 ? (T)0 : x;
            }
        break;
    case BE_ACT_SIGMOID: ACT_LOOP(1.0 / (1.0 + exp(-x))); break;
    case BE_ACT_TANH: ACT_LOOP(tanh(x)); break;
    }
#undef ACT_LOOP
}

/* gin = beta * gin + gout * f'(x, y); operands gin, x, y, gout. */
static void SFX(act_bw_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *gi = (T *)pp[0];
    const T *xs = (const T *)pp[1], *ys = (const T *)pp[2], *go = (const T *)pp[3];
    int64_t s0 = bst[0] / (int64_t)sizeof(T), s1 = bst[1] / (int64_t)sizeof(T),
            s2 = bst[2] / (int64_t)sizeof(T), s3 = bst[3] / (int64_t)sizeof(T);
    double beta = c->beta;
    if ((enum be_act)c->op == BE_ACT_RELU && beta == 0) {
        if (s0 == 1 && s2 == 1 && s3 == 1)
            for (int64_t i = 0; i < n; i++) {
                T g = go[i];   /* loaded unconditionally, so the loop vectorises */
                gi[i] = ys[i] <= 0 ? (T)0 : g;
            }
        else
            for (int64_t i = 0; i < n; i++)
                gi[i * s0] = ys[i * s2] <= 0 ? (T)0 : go[i * s3];
        return;
    }
#define BW_LOOP(DERIV)                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                  \
        double x = (double)xs[i * s1], y = (double)ys[i * s2], g = (double)go[i * s3]; \
        (void)x;                                                                       \
        (void)y;                                                                       \
        double v = g * (DERIV);                                                        \
        gi[i * s0] = (T)(beta == 0 ? v : beta * (double)gi[i * s0] + v);               \
    }
    switch ((enum be_act)c->op) {
    case BE_ACT_RELU: BW_LOOP(y > 0 ? 1.0 : 0.0); break;
    case BE_ACT_SIGMOID: BW_LOOP((1.0 - y) * y); break;
    case BE_ACT_TANH: BW_LOOP(1.0 - y * y); break;
    }
#undef BW_LOOP
}

/* Rows of a (N, C) view: element (i, j) at a + i * r + j * s (element strides). */
static void SFX(softmax_rows)(const T *a, int64_t ar, int64_t as, T *o, int64_t n, int64_t cols)
{
    for (int64_t i = 0; i < n; i++) {
        const T *x = a + i * ar;
        T *y = o + i * cols;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < cols; j++)
            mx = fmax(mx, (double)x[j * as]);
        for (int64_t j = 0; j < cols; j++)
            sum += exp((double)x[j * as] - mx);
        for (int64_t j = 0; j < cols; j++)
            y[j] = (T)(exp((double)x[j * as] - mx) / sum);
    }
}

static void SFX(softmax_bw_rows)(const T *y, int64_t yr, int64_t ys, const T *g, int64_t gr,
                                 int64_t gs, T *gi, int64_t n, int64_t cols, double beta)
{
    for (int64_t i = 0; i < n; i++) {
        const T *yy = y + i * yr, *gg = g + i * gr;
        T *o = gi + i * cols;
        double s = 0;
        for (int64_t j = 0; j < cols; j++)
            s += (double)gg[j * gs] * (double)yy[j * ys];
        for (int64_t j = 0; j < cols; j++) {
            double gv = gg[j * gs], yv = yy[j * ys];
            double v = yv * (gv - s);
            o[j] = (T)(beta == 0 ? v : beta * (double)o[j] + v);
        }
    }
}

/* Cross entropy: the first bad label goes to *bad (row) and *bad_val; returns the loss sum. */
static double SFX(xent_rows)(const T *x, int64_t xr, int64_t xs, const T *lab, int64_t ls,
                             int64_t n, int64_t cols, int64_t *bad, double *bad_val)
{
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        double l = (double)lab[i * ls];
        if (!(l >= 0 && l < (double)cols && l == floor(l))) {
            *bad = i;
            *bad_val = l;
            return NAN;
        }
        const T *row = x + i * xr;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < cols; j++)
            mx = fmax(mx, (double)row[j * xs]);
        for (int64_t j = 0; j < cols; j++)
            sum += exp((double)row[j * xs] - mx);
        total += mx + log(sum) - (double)row[(int64_t)l * xs];
    }
    return total;
}

static void SFX(xent_bw_rows)(const T *x, int64_t xr, int64_t xs, const T *lab, int64_t ls,
                              T *g, int64_t n, int64_t cols, double scale, double beta)
{
    for (int64_t i = 0; i < n; i++) {
        const T *row = x + i * xr;
        T *o = g + i * cols;
        int64_t l = (int64_t)lab[i * ls];
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < cols; j++)
            mx = fmax(mx, (double)row[j * xs]);
        for (int64_t j = 0; j < cols; j++)
            sum += exp((double)row[j * xs] - mx);
        for (int64_t j = 0; j < cols; j++) {
            double v = (exp((double)row[j * xs] - mx) / sum - (j == l ? 1.0 : 0.0)) * scale;
            o[j] = (T)(beta == 0 ? v : beta * (double)o[j] + v);
        }
    }
}

/* BCE with logits over one run of (x, y): sum into acc; the first target outside [0, 1]
 * is remembered by its row-major index. */
static void SFX(bce_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    struct lin_ctx *c = (struct lin_ctx *)vc;
    const T *xs = (const T *)pp[0], *ys = (const T *)pp[1];
    int64_t sx = bst[0] / (int64_t)sizeof(T), sy = bst[1] / (int64_t)sizeof(T);
    double acc = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = xs[i * sx], y = ys[i * sy];
        if (!(y >= 0 && y <= 1) && c->bad < 0) {
            c->bad = c->done + i;
            c->bad_val = y;
        }
        double m = x < 0 ? -x : 0;
        acc += (1 - y) * x + m + log(exp(-m) + exp(-x - m));
    }
    c->acc += acc;
    c->done += n;
}

/* gx = beta * gx + (sigmoid(x) - y) * scale; operands gx, x, y. */
static void SFX(bce_bw_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *g = (T *)pp[0];
    const T *xs = (const T *)pp[1], *ys = (const T *)pp[2];
    int64_t sg = bst[0] / (int64_t)sizeof(T), sx = bst[1] / (int64_t)sizeof(T),
            sy = bst[2] / (int64_t)sizeof(T);
    for (int64_t i = 0; i < n; i++) {
        double v = (1.0 / (1.0 + exp(-(double)xs[i * sx])) - (double)ys[i * sy]) * c->alpha;
        g[i * sg] = (T)(c->beta == 0 ? v : c->beta * (double)g[i * sg] + v);
    }
}

/* rows (n, c) contiguous: o[i, j] = f(o[i, j] + b[j]), in T as torch's add then activation. */
static void SFX(bias_act_rows)(T *o, const T *b, int64_t n, int64_t c, enum be_act op)
{
    for (int64_t i = 0; i < n; i++) {
        T *r = o + i * c;
        switch (op) {
        case BE_ACT_RELU:
            for (int64_t j = 0; j < c; j++) {
                T v = r[j] + b[j];
                r[j] = v <= 0 ? (T)0 : v;
            }
            break;
        case BE_ACT_SIGMOID:
            for (int64_t j = 0; j < c; j++)
                r[j] = (T)(1.0 / (1.0 + exp(-(double)(T)(r[j] + b[j]))));
            break;
        default:
            for (int64_t j = 0; j < c; j++)
                r[j] = (T)tanh((double)(T)(r[j] + b[j]));
            break;
        }
    }
}
