/* be_cpu_loops.h — the CPU inner loops for one element type; be_cpu.c includes it per dtype
 * with T (float or double) and SFX(name) defined. Accumulation is always in double. */

/* Pairwise summation exactly as numpy's pairwise_sum (8 accumulators, blocks of 128), so
 * float64 sums agree with numpy bit for bit on the same values; LOAD(i) reads element i. */
#define DEF_PSUM(NAME, PARAMS, LEFT, RIGHT, LOAD)                                      \
    static double NAME PARAMS                                                          \
    {                                                                                  \
        if (n < 8) {                                                                   \
            double res = 0.;                                                           \
            for (int64_t i = 0; i < n; i++)                                            \
                res += LOAD(i);                                                        \
            return res;                                                                \
        }                                                                              \
        if (n <= 128) {                                                                \
            double r[8];                                                               \
            int64_t i;                                                                 \
            for (int j = 0; j < 8; j++)                                                \
                r[j] = LOAD(j);                                                        \
            for (i = 8; i < n - (n % 8); i += 8)                                       \
                for (int j = 0; j < 8; j++)                                            \
                    r[j] += LOAD(i + j);                                               \
            double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])); \
            for (; i < n; i++)                                                         \
                res += LOAD(i);                                                        \
            return res;                                                                \
        }                                                                              \
        int64_t n2 = n / 2;                                                            \
        n2 -= n2 % 8;                                                                  \
        return NAME LEFT + NAME RIGHT;                                                 \
    }

#define LOAD_X(i) ((double)x[(i) * s])
#define LOAD_SQ(i) sq((double)x[(i) * s])
#define LOAD_SQDIFF(i) sq((double)p[(i) * sp] - (double)t[(i) * st])
DEF_PSUM(SFX(psum), (const T *x, int64_t s, int64_t n), (x, s, n2), (x + n2 * s, s, n - n2),
         LOAD_X)
DEF_PSUM(SFX(psum_sq), (const T *x, int64_t s, int64_t n), (x, s, n2),
         (x + n2 * s, s, n - n2), LOAD_SQ)
DEF_PSUM(SFX(psum_sqdiff), (const T *p, int64_t sp, const T *t, int64_t st, int64_t n),
         (p, sp, t, st, n2), (p + n2 * sp, sp, t + n2 * st, st, n - n2), LOAD_SQDIFF)
#undef LOAD_X
#undef LOAD_SQ
#undef LOAD_SQDIFF

/* Sum over several (collapsed) dimensions: halve the outermost until one slice, recurse. */
static double SFX(psum_nd)(const char *p, int nd, const int64_t *sh, const int64_t *st);

static double SFX(psum_split)(const char *p, int64_t lo, int64_t hi, int nd, const int64_t *sh,
                              const int64_t *st)
{
    if (hi - lo == 1)
        return SFX(psum_nd)(p + lo * st[0], nd - 1, sh + 1, st + 1);
    int64_t mid = lo + (hi - lo) / 2;
    return SFX(psum_split)(p, lo, mid, nd, sh, st) + SFX(psum_split)(p, mid, hi, nd, sh, st);
}

static double SFX(psum_nd)(const char *p, int nd, const int64_t *sh, const int64_t *st)
{
    if (nd == 0)
        return (double)*(const T *)p;
    if (nd == 1)
        return SFX(psum)((const T *)p, st[0] / (int64_t)sizeof(T), sh[0]);
    if (sh[0] == 0)
        return 0.;
    return SFX(psum_split)(p, 0, sh[0], nd, sh, st);
}

/* out = beta * out + alpha * (a op b) over one strided run. */
static void SFX(binary_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *o = (T *)pp[0];
    const T *a = (const T *)pp[1], *b = (const T *)pp[2];
    int64_t so = bst[0] / (int64_t)sizeof(T), sa = bst[1] / (int64_t)sizeof(T),
            sb = bst[2] / (int64_t)sizeof(T);
    double alpha = c->alpha, beta = c->beta;
#define BIN_LOOP(EXPR)                                                                 \
    do {                                                                               \
        if (beta == 0 && alpha == 1)                                                   \
            for (int64_t i = 0; i < n; i++) {                                          \
                double x = a[i * sa], y = b[i * sb];                                   \
                o[i * so] = (T)(EXPR);                                                 \
            }                                                                          \
        else if (beta == 0)                                                            \
            for (int64_t i = 0; i < n; i++) {                                          \
                double x = a[i * sa], y = b[i * sb];                                   \
                o[i * so] = (T)(alpha * (EXPR));                                       \
            }                                                                          \
        else                                                                           \
            for (int64_t i = 0; i < n; i++) {                                          \
                double x = a[i * sa], y = b[i * sb];                                   \
                o[i * so] = (T)(beta * o[i * so] + alpha * (EXPR));                    \
            }                                                                          \
    } while (0)
    switch (c->op) {
    case BE_BIN_ADD: BIN_LOOP(x + y); break;
    case BE_BIN_SUB: BIN_LOOP(x - y); break;
    case BE_BIN_MUL: BIN_LOOP(x * y); break;
    }
#undef BIN_LOOP
}

/* out = beta * out + alpha * f(a). */
static void SFX(unary_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *o = (T *)pp[0];
    const T *a = (const T *)pp[1];
    int64_t so = bst[0] / (int64_t)sizeof(T), sa = bst[1] / (int64_t)sizeof(T);
    double alpha = c->alpha, beta = c->beta;
    for (int64_t i = 0; i < n; i++) {
        double x = a[i * sa], v = x * x;   /* BE_UN_SQUARE, the only one */
        if (alpha != 1)
            v *= alpha;
        o[i * so] = (T)(beta == 0 ? v : beta * o[i * so] + v);
    }
}

/* dst = beta * dst + alpha * (src / div), element by element (copy, axpy, broadcast). */
static void SFX(axpby_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *d = (T *)pp[0];
    const T *s = (const T *)pp[1];
    int64_t sd = bst[0] / (int64_t)sizeof(T), ss = bst[1] / (int64_t)sizeof(T);
    double alpha = c->alpha, beta = c->beta, div = c->div;
    if (alpha == 1 && div == 1 && beta == 0) {
        for (int64_t i = 0; i < n; i++)
            d[i * sd] = s[i * ss];
    } else if (alpha == 1 && div == 1 && beta == 1) {
        for (int64_t i = 0; i < n; i++)
            d[i * sd] = (T)((double)d[i * sd] + (double)s[i * ss]);
    } else {
        for (int64_t i = 0; i < n; i++) {
            double v = alpha * ((double)s[i * ss] / div);
            d[i * sd] = (T)(beta == 0 ? v : beta * d[i * sd] + v);
        }
    }
}

/* The same, where each src "element" is a pairwise sum over the reduced dimensions. */
static void SFX(reduce_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *d = (T *)pp[0];
    const char *s = pp[1];
    int64_t sd = bst[0] / (int64_t)sizeof(T);
    for (int64_t i = 0; i < n; i++) {
        double v = c->alpha * (SFX(psum_nd)(s + i * bst[1], c->rnd, c->rshape, c->rstride) / c->div);
        d[i * sd] = (T)(c->beta == 0 ? v : c->beta * d[i * sd] + v);
    }
}

static void SFX(fill_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *d = (T *)pp[0];
    int64_t sd = bst[0] / (int64_t)sizeof(T);
    T v = (T)c->alpha;
    if (c->op)  /* scale */
        for (int64_t i = 0; i < n; i++)
            d[i * sd] = (T)(d[i * sd] * v);
    else
        for (int64_t i = 0; i < n; i++)
            d[i * sd] = v;
}

static void SFX(sumsq_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    struct lin_ctx *c = (struct lin_ctx *)vc;
    c->acc += SFX(psum_sq)((const T *)pp[0], bst[0] / (int64_t)sizeof(T), n);
}

static void SFX(sqdiff_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    struct lin_ctx *c = (struct lin_ctx *)vc;
    c->acc += SFX(psum_sqdiff)((const T *)pp[0], bst[0] / (int64_t)sizeof(T),
                               (const T *)pp[1], bst[1] / (int64_t)sizeof(T), n);
}

/* g = beta * g + sign * (norm * (p - t)) * gout: PyTorch's mse_loss_backward order. */
static void SFX(mse_bw_inner)(int64_t n, char *const *pp, const int64_t *bst, const void *vc)
{
    const struct lin_ctx *c = vc;
    T *g = (T *)pp[0];
    const T *p = (const T *)pp[1], *t = (const T *)pp[2];
    int64_t sg = bst[0] / (int64_t)sizeof(T), sp = bst[1] / (int64_t)sizeof(T),
            st = bst[2] / (int64_t)sizeof(T);
    T norm = (T)c->div, gout = (T)c->alpha;
    for (int64_t i = 0; i < n; i++) {
        T v = (T)(norm * (T)(p[i * sp] - t[i * st])) * gout;
        if (c->op)
            v = -v;
        g[i * sg] = c->beta == 0 ? v : (T)(c->beta * g[i * sg] + v);
    }
}

/* torch.optim.SGD.step for one flat run; arithmetic in T as PyTorch does. */
static void SFX(sgd_loop)(int64_t n, T *p, const T *g, T *buf, const struct be_sgd_args *a)
{
    const T lr = (T)a->lr, m = (T)a->momentum, wd = (T)a->weight_decay;
    bool clip = false;
    const T cv = a->clip.sumsq ? (T)be_clip_coef(*a->clip.sumsq, a->clip.max_norm, &clip) : 1;
    for (int64_t i = 0; i < n; i++) {
        T d = g[i];
        if (clip)   /* clip_grad_norm_'s g.mul_(coef), as fill_inner's scale */
            d = (T)(d * cv);
        if (wd != 0)
            d = d + wd * p[i];
        if (buf) {
            buf[i] = a->first ? d : m * buf[i] + d;
            d = a->nesterov ? d + m * buf[i] : buf[i];
        }
        p[i] = p[i] + (-lr) * d;
    }
}

/* torch.optim.Adam(W) for one flat run, in PyTorch's operation order:
 * m = m*b1 + (1-b1)*g; v = v*b2 + ((1-b2)*g)*g; p += (-step_size * m) / (sqrt(v)/sqrt(bc2) + eps). */
static void SFX(adam_loop)(int64_t n, T *p, const T *g, T *m, T *v, const struct be_adam_args *a)
{
    const double bc1 = 1 - pow(a->beta1, (double)a->step), bc2 = 1 - pow(a->beta2, (double)a->step);
    const T step_size = (T)(a->lr / bc1), bc2_sqrt = (T)sqrt(bc2), eps = (T)a->eps;
    const T b1 = (T)a->beta1, b2 = (T)a->beta2, one_b1 = (T)(1 - a->beta1),
            one_b2 = (T)(1 - a->beta2), wd = (T)a->weight_decay,
            shrink = (T)(1 - a->lr * a->weight_decay);
    bool clip = false;
    const T cv = a->clip.sumsq ? (T)be_clip_coef(*a->clip.sumsq, a->clip.max_norm, &clip) : 1;
    for (int64_t i = 0; i < n; i++) {
        T d = g[i];
        if (clip)
            d = (T)(d * cv);
        if (a->decoupled)
            p[i] = p[i] * shrink;
        else if (wd != 0)
            d = d + wd * p[i];
        m[i] = m[i] * b1 + one_b1 * d;
        v[i] = v[i] * b2 + one_b2 * d * d;
        T denom = (T)sqrt((double)v[i]) / bc2_sqrt + eps;
        p[i] = p[i] + (-step_size) * m[i] / denom;
    }
}
