/* test_conformance_nn.c — the CUDA backend's MLP and loss entries (act, bias_act, softmax, cross entropy, BCE, linear_mse) against the CPU's. */
#include "conformance.h"

/*
 * Arithmetic the CPU does exactly (relu, the bias add, the derivatives built from y
 * alone) is expected bit for bit (TOL_ELEM). What goes through exp, log or tanh uses
 * CUDA's libm on a GPU, an ulp or two from glibc's, hence TOL_LIBM;
 * sums reorder, hence TOL_SUM. In the host emulation all of it is the host's libm.
 */
#define TOL_LIBM(dt) ((dt) == TENSOR_F64 ? 1e-13 : 2.5e-7)
#define TOL_ROWSUM(dt) ((dt) == TENSOR_F64 ? 1e-12 : 2.5e-7)

GPU_SUITE(conformance_nn, 240);

/* Odd shapes: one element, a short run, a 2-D tile, a length no block size divides. */
static const struct {
    int nd;
    int64_t s[2];
} shapes[] = {{1, {1, 0}}, {1, {7, 0}}, {2, {13, 5}}, {1, {100003, 0}}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static int64_t numel_of(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= s[i];
    return n;
}

/* The same given values on both backends. */
static struct dual dual_of(enum tensor_dtype dt, int nd, const int64_t *shape, const double *v)
{
    return (struct dual){tensor_on(be_cpu(), dt, nd, shape, v), tensor_on(be, dt, nd, shape, v)};
}

/* t (r, c) seen as its transpose (c, r): a view with a unit row stride. */
static struct tensor transposed(const struct tensor *t)
{
    struct tensor v = *t;
    v.shape[0] = t->shape[1];
    v.shape[1] = t->shape[0];
    v.stride[0] = t->stride[1];
    v.stride[1] = t->stride[0];
    return v;
}

static double act_tol(enum be_act op, enum tensor_dtype dt)
{
    return op == BE_ACT_RELU ? TOL_ELEM(dt) : TOL_LIBM(dt);
}

static const char *const act_names[] = {"relu", "sigmoid", "tanh"};

Test(conformance_nn, act_of_every_function_over_odd_shapes)
{
    struct err e = {0};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NSHAPES; s++)
            for (int op = BE_ACT_RELU; op <= BE_ACT_TANH; op++) {
                enum tensor_dtype dt = both_dtypes[d];
                int64_t n = numel_of(shapes[s].nd, shapes[s].s);
                double *v = pattern(n, 30);
                struct dual a = dual_of(dt, shapes[s].nd, shapes[s].s, v);
                struct guarded o = out_new(be, dt, shapes[s].nd, shapes[s].s, NULL);
                cr_assert_eq(be_cpu()->k->act(be_cpu(), op, a.c, o.c, &e), 0);
                cr_assert_eq(be->k->act(be, op, a.g, o.g, &e), 0, "%s", e.msg);
                char what[96];
                snprintf(what, sizeof what, "%s %s shape %zu", act_names[op],
                         tensor_dtype_name(dt), s);
                out_check(&o, act_tol(op, dt), EPS(dt), what);
                out_free(&o);
                dual_free(a);
                free(v);
            }
}

/* relu is torch's threshold: 0 and -0 give 0, positives pass; read through a transposed view. */
Test(conformance_nn, act_reads_strided_views_and_relu_keeps_torchs_threshold)
{
    struct err e = {0};
    const int64_t s5x3[] = {5, 3}, s3x5[] = {3, 5};
    double v[15];
    double *p = pattern(15, 31);
    for (int i = 0; i < 15; i++)
        v[i] = i % 4 == 0 ? 0.0 : i % 4 == 1 ? -0.0 : p[i];
    for (int d = 0; d < 2; d++)
        for (int op = BE_ACT_RELU; op <= BE_ACT_TANH; op++) {
            enum tensor_dtype dt = both_dtypes[d];
            struct dual a = dual_of(dt, 2, s5x3, v);
            struct tensor ac = transposed(a.c), ag = transposed(a.g);
            struct guarded o = out_new(be, dt, 2, s3x5, NULL);
            cr_assert_eq(be_cpu()->k->act(be_cpu(), op, &ac, o.c, &e), 0);
            cr_assert_eq(be->k->act(be, op, &ag, o.g, &e), 0, "%s", e.msg);
            out_check(&o, act_tol(op, dt), EPS(dt), act_names[op]);
            out_free(&o);
            dual_free(a);
        }
    free(p);
}

Test(conformance_nn, act_backward_of_every_function_with_beta_0_and_1)
{
    struct err e = {0};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NSHAPES; s++)
            for (int op = BE_ACT_RELU; op <= BE_ACT_TANH; op++)
                for (int beta = 0; beta <= 1; beta++) {
                    enum tensor_dtype dt = both_dtypes[d];
                    int nd = shapes[s].nd;
                    const int64_t *sh = shapes[s].s;
                    int64_t n = numel_of(nd, sh);
                    double *xv = pattern(n, 32);
                    double *yv = pattern(n, 33);
                    double *gv = pattern(n, 34), *init = beta ? pattern(n, 35) : NULL;
                    struct dual x = dual_of(dt, nd, sh, xv), y = dual_of(dt, nd, sh, yv),
                                g = dual_of(dt, nd, sh, gv);
                    struct guarded o = out_new(be, dt, nd, sh, init);
                    cr_assert_eq(be_cpu()->k->act_backward(be_cpu(), op, x.c, y.c, g.c, o.c,
                                                           beta, &e), 0);
                    cr_assert_eq(be->k->act_backward(be, op, x.g, y.g, g.g, o.g, beta, &e),
                                 0, "%s", e.msg);
                    char what[96];
                    snprintf(what, sizeof what, "d %s %s shape %zu beta %d", act_names[op],
                             tensor_dtype_name(dt), s, beta);
                    out_check(&o, TOL_ELEM(dt), EPS(dt), what);
                    out_free(&o);
                    dual_free(x);
                    dual_free(y);
                    dual_free(g);
                    free(xv);
                    free(yv);
                    free(gv);
                    free(init);
                }
}

/* The gradient arrives as a transposed view, as autograd hands out views of views. */
Test(conformance_nn, act_backward_reads_a_strided_gradient)
{
    struct err e = {0};
    const int64_t s5x3[] = {5, 3}, s3x5[] = {3, 5};
    for (int d = 0; d < 2; d++)
        for (int op = BE_ACT_RELU; op <= BE_ACT_TANH; op++) {
            enum tensor_dtype dt = both_dtypes[d];
            struct dual x = dual_new(be, dt, 2, s3x5, 36), y = dual_new(be, dt, 2, s3x5, 37),
                        g = dual_new(be, dt, 2, s5x3, 38);
            struct tensor gc = transposed(g.c), gg = transposed(g.g);
            struct guarded o = out_new(be, dt, 2, s3x5, NULL);
            cr_assert_eq(be_cpu()->k->act_backward(be_cpu(), op, x.c, y.c, &gc, o.c, 0, &e), 0);
            cr_assert_eq(be->k->act_backward(be, op, x.g, y.g, &gg, o.g, 0, &e), 0, "%s",
                         e.msg);
            out_check(&o, TOL_ELEM(dt), EPS(dt), act_names[op]);
            out_free(&o);
            dual_free(x);
            dual_free(y);
            dual_free(g);
        }
}

Test(conformance_nn, bias_act_relu_sigmoid_tanh_in_place)
{
    struct err e = {0};
    const int64_t shapes2[][2] = {{1, 1}, {13, 5}, {1001, 37}};
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 3; s++)
            for (int op = BE_ACT_RELU; op <= BE_ACT_TANH; op++) {
                enum tensor_dtype dt = both_dtypes[d];
                int64_t n = shapes2[s][0] * shapes2[s][1];
                double *init = pattern(n, 44);
                struct dual b = dual_new(be, dt, 1, &shapes2[s][1], 45);
                struct guarded o = out_new(be, dt, 2, shapes2[s], init);
                cr_assert_eq(be_cpu()->k->bias_act(be_cpu(), o.c, b.c, op, &e), 0);
                cr_assert_eq(be->k->bias_act(be, o.g, b.g, op, &e), 0, "%s", e.msg);
                char what[96];
                snprintf(what, sizeof what, "bias + %s %s (%lld, %lld)", act_names[op],
                         tensor_dtype_name(dt), (long long)shapes2[s][0],
                         (long long)shapes2[s][1]);
                out_check(&o, act_tol(op, dt), EPS(dt), what);
                out_free(&o);
                dual_free(b);
                free(init);
            }
}

Test(conformance_nn, bias_act_refuses_other_functions_as_the_cpu_does)
{
    struct err ec = {0}, eg = {0};
    const int64_t s2x2[] = {2, 2}, two[] = {2};
    struct dual o = dual_new(be, TENSOR_F32, 2, s2x2, 46), b = dual_new(be, TENSOR_F32, 1, two, 47);
    cr_expect_eq(be_cpu()->k->bias_act(be_cpu(), o.c, b.c, (enum be_act)(BE_ACT_TANH + 1), &ec), ERR_INVALID_ARG);
    cr_expect_eq(be->k->bias_act(be, o.g, b.g, (enum be_act)(BE_ACT_TANH + 1), &eg), ERR_INVALID_ARG);
    cr_expect_str_eq(eg.msg, ec.msg);
    dual_free(o);
    dual_free(b);
}

/* (rows, cols) problems: short rows take a thread each, long rows (over 64) a block each. */
static const int64_t row_shapes[][2] = {{1, 1}, {7, 3}, {4099, 5}, {9, 300}, {3, 1031}};
#define NROWS (sizeof row_shapes / sizeof row_shapes[0])

Test(conformance_nn, softmax_over_short_and_long_rows)
{
    struct err e = {0};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NROWS; s++) {
            enum tensor_dtype dt = both_dtypes[d];
            struct dual a = dual_new(be, dt, 2, row_shapes[s], 50);
            struct guarded o = out_new(be, dt, 2, row_shapes[s], NULL);
            cr_assert_eq(be_cpu()->k->softmax(be_cpu(), a.c, o.c, &e), 0);
            cr_assert_eq(be->k->softmax(be, a.g, o.g, &e), 0, "%s", e.msg);
            char what[96];
            snprintf(what, sizeof what, "softmax %s (%lld, %lld)",
                     tensor_dtype_name(dt), (long long)row_shapes[s][0],
                     (long long)row_shapes[s][1]);
            out_check(&o, TOL_ROWSUM(dt), 1e-6, what);
            out_free(&o);
            dual_free(a);
        }
}

Test(conformance_nn, softmax_reads_a_transposed_input)
{
    struct err e = {0};
    const int64_t s5x13[] = {5, 13}, s13x5[] = {13, 5}, s200x3[] = {200, 3}, s3x200[] = {3, 200};
    const int64_t *in[] = {s5x13, s200x3}, *out[] = {s13x5, s3x200};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++) {
            enum tensor_dtype dt = both_dtypes[d];
            struct dual a = dual_new(be, dt, 2, in[k], 51);
            struct tensor ac = transposed(a.c), ag = transposed(a.g);
            struct guarded o = out_new(be, dt, 2, out[k], NULL);
            cr_assert_eq(be_cpu()->k->softmax(be_cpu(), &ac, o.c, &e), 0);
            cr_assert_eq(be->k->softmax(be, &ag, o.g, &e), 0, "%s", e.msg);
            out_check(&o, TOL_ROWSUM(dt), 1e-6, "softmax of a transposed view");
            out_free(&o);
            dual_free(a);
        }
}

Test(conformance_nn, softmax_backward_with_beta_and_a_strided_gradient)
{
    struct err e = {0};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NROWS; s++)
            for (int beta = 0; beta <= 1; beta++) {
                enum tensor_dtype dt = both_dtypes[d];
                const int64_t *sh = row_shapes[s], tsh[] = {sh[1], sh[0]};
                /* y: a real softmax output */
                struct dual a = dual_new(be, dt, 2, sh, 52), y = dual_new(be, dt, 2, sh, 0);
                cr_assert_eq(be_cpu()->k->softmax(be_cpu(), a.c, y.c, &e), 0);
                double *yv = values_of(y.c);
                cr_assert_eq(tensor_copy_from_host_f64(y.g, yv, &e), 0, "%s", e.msg);
                struct dual g = dual_new(be, dt, 2, tsh, 53);
                struct tensor gc = transposed(g.c), gg = transposed(g.g);
                double *init = beta ? pattern(sh[0] * sh[1], 54) : NULL;
                struct guarded o = out_new(be, dt, 2, sh, init);
                cr_assert_eq(be_cpu()->k->softmax_backward(be_cpu(), y.c, &gc, o.c, beta, &e),
                             0);
                cr_assert_eq(be->k->softmax_backward(be, y.g, &gg, o.g, beta, &e), 0,
                             "%s", e.msg);
                char what[96];
                snprintf(what, sizeof what, "d softmax %s (%lld, %lld) beta %d",
                         tensor_dtype_name(dt),
                         (long long)sh[0], (long long)sh[1], beta);
                out_check(&o, TOL_ROWSUM(dt), 1e-3, what);
                out_free(&o);
                dual_free(a);
                dual_free(y);
                dual_free(g);
                free(yv);
                free(init);
            }
}

/* Class labels i * 7 mod cols, as floats, in column 0 of an (n, 2) block: a strided view. */
static struct dual labels_new(enum tensor_dtype dt, int64_t n, int64_t cols, struct dual *block)
{
    const int64_t shape[] = {n, 2};
    double *v = pattern(n * 2, 55);
    for (int64_t i = 0; i < n; i++)
        v[i * 2] = (double)((i * 7) % cols);
    *block = dual_of(dt, 2, shape, v);
    free(v);
    return dual_select(*block, 1, 0);
}

Test(conformance_nn, cross_entropy_over_short_and_long_rows_with_strided_labels)
{
    struct err e = {0};
    const int64_t one[] = {1};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NROWS; s++) {
            enum tensor_dtype dt = both_dtypes[d];
            const int64_t *sh = row_shapes[s];
            struct dual block, x = dual_new(be, dt, 2, sh, 56);
            struct dual l = labels_new(dt, sh[0], sh[1], &block);
            struct guarded o = out_new(be, dt, 1, one, NULL);
            cr_assert_eq(be_cpu()->k->xent(be_cpu(), x.c, l.c, o.c, &e), 0, "%s", e.msg);
            cr_assert_eq(be->k->xent(be, x.g, l.g, o.g, &e), 0, "%s", e.msg);
            char what[96];
            snprintf(what, sizeof what, "cross entropy %s (%lld, %lld)", tensor_dtype_name(dt),
                     (long long)sh[0], (long long)sh[1]);
            out_check(&o, TOL_ROWSUM(dt), 1e-9, what);
            out_free(&o);
            dual_free(x);
            dual_free(l);
            dual_free(block);
        }
}

/* Labels in column 0 of an (n, 2) block (a strided view): class i % cols, but bad at row
 * first (value v) and at a later row (cols + 4, also bad). */
static struct dual bad_labels_new(enum tensor_dtype dt, int64_t n, int64_t cols, int64_t first,
                                  int64_t later, double v, struct dual *block)
{
    const int64_t shape[] = {n, 2};
    double *lv = pattern(n * 2, 56);
    for (int64_t i = 0; i < n; i++)
        lv[i * 2] = (double)(i % cols);
    lv[first * 2] = v;
    lv[later * 2] = (double)(cols + 4);
    *block = dual_of(dt, 2, shape, lv);
    free(lv);
    return dual_select(*block, 1, 0);
}

/*
 * A GPU loss whose labels are bad returns 0 (its check is queued, not waited for); the next
 * read of its output og gives the CPU's message cpu_msg, naming the row ("at row N "), and
 * the read after that is clean.
 */
static void expect_reported_at_the_next_wait(struct tensor *og, const char *cpu_msg, int64_t row)
{
    struct err e = {0};
    double v;
    cr_assert_eq(tensor_item(og, &v, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_expect_str_eq(e.msg, cpu_msg);
    char want[32];
    snprintf(want, sizeof want, "at row %lld ", (long long)row);
    cr_expect(strstr(e.msg, want), "%s", e.msg);
    cr_expect_eq(tensor_item(og, &v, &e), 0, "reported once: %s", e.msg);
}

/*
 * The GPU checks labels on the device and reports at the host's next wait, as PyTorch's CUDA
 * device-side assert does, so a step never waits for its labels; the message is the CPU's.
 * 3000 rows span several blocks of the check; 100 classes take the loss's block-per-row path,
 * where a bad row's early return must not leave a barrier waiting.
 */
Test(conformance_nn, cross_entropy_names_the_first_bad_label_as_the_cpu_does)
{
    /* rows, classes, the first bad row, a later one */
    const int64_t cases[][4] = {{40, 5, 17, 30}, {3000, 5, 2500, 2900}, {40, 100, 17, 30}};
    const int64_t one[] = {1};
    for (int d = 0; d < 2; d++)
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 4; k++) {
                const double bad[] = {3.5, -1, (double)cases[r][1], NAN};
                enum tensor_dtype dt = both_dtypes[d];
                const int64_t sh[] = {cases[r][0], cases[r][1]};
                struct dual block, x = dual_new(be, dt, 2, sh, 57),
                                   l = bad_labels_new(dt, sh[0], sh[1], cases[r][2], cases[r][3],
                                                      bad[k], &block);
                struct tensor *oc = tensor_on(be_cpu(), dt, 1, one, NULL), *og = tensor_on(be, dt, 1, one, NULL);
                struct err ec = {0}, eg = {0};
                cr_assert_eq(be_cpu()->k->xent(be_cpu(), x.c, l.c, oc, &ec), ERR_INVALID_DATA);
                cr_assert_eq(be->k->xent(be, x.g, l.g, og, &eg), 0, "queued, not waited for: %s", eg.msg);
                /* The backward adds no one-hot for a bad label, and neither waits nor reports. */
                struct tensor *gx = tensor_on(be, dt, 2, sh, NULL);
                cr_assert_eq(be->k->xent_backward(be, x.g, l.g, og, gx, 0, &eg), 0, "%s", eg.msg);
                expect_reported_at_the_next_wait(og, ec.msg, cases[r][2]);
                tensor_free(gx);
                tensor_free(oc);
                tensor_free(og);
                dual_free(x);
                dual_free(l);
                dual_free(block);
            }
}

Test(conformance_nn, a_wait_names_the_first_of_two_bad_batches_and_the_next_check_starts_clean)
{
    const int64_t sh[] = {40, 5}, one[] = {1};
    struct dual ba, bb, x = dual_new(be, TENSOR_F32, 2, sh, 58),
                        la = bad_labels_new(TENSOR_F32, 40, 5, 21, 33, 7, &ba),
                        lb = bad_labels_new(TENSOR_F32, 40, 5, 2, 3, -2, &bb);
    struct tensor *o = tensor_on(be, TENSOR_F32, 1, one, NULL);
    struct err e = {0};
    double v;
    cr_assert_eq(be->k->xent(be, x.g, la.g, o, &e), 0, "%s", e.msg);
    cr_assert_eq(be->k->xent(be, x.g, lb.g, o, &e), 0, "%s", e.msg);
    cr_assert_eq(tensor_item(o, &v, &e), ERR_INVALID_DATA);
    cr_expect_str_eq(e.msg, "label 7 at row 21 is not a class index in [0, 5)");
    /* A good batch after it: nothing to report. */
    struct dual gb, lg = labels_new(TENSOR_F32, 40, 5, &gb);
    cr_assert_eq(be->k->xent(be, x.g, lg.g, o, &e), 0, "%s", e.msg);
    cr_assert_eq(tensor_item(o, &v, &e), 0, "%s", e.msg);
    /* The second bad batch alone names its own row. */
    cr_assert_eq(be->k->xent(be, x.g, lb.g, o, &e), 0, "%s", e.msg);
    cr_assert_eq(tensor_item(o, &v, &e), ERR_INVALID_DATA);
    cr_expect_str_eq(e.msg, "label -2 at row 2 is not a class index in [0, 5)");
    tensor_free(o);
    dual_free(x);
    dual_free(la);
    dual_free(lb);
    dual_free(lg);
    dual_free(ba);
    dual_free(bb);
    dual_free(gb);
}

Test(conformance_nn, cross_entropy_backward_with_beta_0_and_1)
{
    struct err e = {0};
    const int64_t one[] = {1};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NROWS; s++)
            for (int beta = 0; beta <= 1; beta++) {
                enum tensor_dtype dt = both_dtypes[d];
                const int64_t *sh = row_shapes[s], tsh[] = {sh[1], sh[0]};
                struct dual block, x = dual_new(be, dt, 2, tsh, 58);
                struct tensor xc = transposed(x.c), xg = transposed(x.g);
                struct dual l = labels_new(dt, sh[0], sh[1], &block);
                double g0 = 0.75;
                struct dual g = dual_of(dt, 1, one, &g0);
                double *init = beta ? pattern(sh[0] * sh[1], 59) : NULL;
                struct guarded o = out_new(be, dt, 2, sh, init);
                cr_assert_eq(be_cpu()->k->xent_backward(be_cpu(), &xc, l.c, g.c, o.c, beta, &e), 0);
                cr_assert_eq(be->k->xent_backward(be, &xg, l.g, g.g, o.g, beta, &e), 0, "%s",
                             e.msg);
                char what[96];
                snprintf(what, sizeof what, "d cross entropy %s (%lld, %lld) beta %d",
                         tensor_dtype_name(dt), (long long)sh[0], (long long)sh[1], beta);
                out_check(&o, TOL_ROWSUM(dt), 1e-3, what);
                out_free(&o);
                dual_free(x);
                dual_free(l);
                dual_free(g);
                dual_free(block);
                free(init);
            }
}

/* Targets in [0, 1] (fractions and the ends), same shape as the logits. */
static double *targets(int64_t n)
{
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    cr_assert_not_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)(i % 5) / 4;
    return v;
}

Test(conformance_nn, bce_with_logits_over_odd_shapes_and_a_strided_column)
{
    struct err e = {0};
    const int64_t one[] = {1};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        for (size_t s = 0; s < NSHAPES; s++) {
            int64_t n = numel_of(shapes[s].nd, shapes[s].s);
            double *tv = targets(n);
            struct dual x = dual_new(be, dt, shapes[s].nd, shapes[s].s, 60),
                        y = dual_of(dt, shapes[s].nd, shapes[s].s, tv);
            struct guarded o = out_new(be, dt, 1, one, NULL);
            cr_assert_eq(be_cpu()->k->bce_logits(be_cpu(), x.c, y.c, o.c, &e), 0, "%s", e.msg);
            cr_assert_eq(be->k->bce_logits(be, x.g, y.g, o.g, &e), 0, "%s", e.msg);
            out_check(&o, TOL_ROWSUM(dt), 1e-9, "bce with logits");
            out_free(&o);
            dual_free(x);
            dual_free(y);
            free(tv);
        }
        /* logits (4099, 1) as column 2 of a batch, target column 0 */
        const int64_t bs[] = {4099, 3};
        double *bv = pattern(4099 * 3, 61);
        for (int64_t i = 0; i < 4099; i++)
            bv[i * 3] = (double)(i % 2);
        struct dual batch = dual_of(dt, 2, bs, bv);
        struct dual x = dual_slice(batch, 1, 2, 3), y = dual_slice(batch, 1, 0, 1);
        struct guarded o = out_new(be, dt, 1, one, NULL);
        cr_assert_eq(be_cpu()->k->bce_logits(be_cpu(), x.c, y.c, o.c, &e), 0, "%s", e.msg);
        cr_assert_eq(be->k->bce_logits(be, x.g, y.g, o.g, &e), 0, "%s", e.msg);
        out_check(&o, TOL_ROWSUM(dt), 1e-9, "bce of batch[:, 2:3] against batch[:, 0:1]");
        out_free(&o);
        dual_free(x);
        dual_free(y);
        dual_free(batch);
        free(bv);
    }
}

Test(conformance_nn, bce_names_the_first_target_outside_0_1_as_the_cpu_does)
{
    const double bad[] = {2, -0.5, NAN};
    const int64_t sh[] = {6, 3}, one[] = {1};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++) {
            enum tensor_dtype dt = both_dtypes[d];
            double *tv = targets(18);
            tv[5] = bad[k];
            tv[11] = 7;
            struct dual x = dual_new(be, dt, 2, sh, 62), y = dual_of(dt, 2, sh, tv);
            struct tensor *oc = tensor_on(be_cpu(), dt, 1, one, NULL), *og = tensor_on(be, dt, 1, one, NULL);
            struct err ec = {0}, eg = {0};
            cr_assert_eq(be_cpu()->k->bce_logits(be_cpu(), x.c, y.c, oc, &ec), ERR_INVALID_DATA);
            cr_assert_eq(be->k->bce_logits(be, x.g, y.g, og, &eg), 0, "queued: %s", eg.msg);
            expect_reported_at_the_next_wait(og, ec.msg, 5);
            tensor_free(oc);
            tensor_free(og);
            dual_free(x);
            dual_free(y);
            free(tv);
        }
}

Test(conformance_nn, bce_backward_with_beta_0_and_1)
{
    struct err e = {0};
    const int64_t one[] = {1};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NSHAPES; s++)
            for (int beta = 0; beta <= 1; beta++) {
                enum tensor_dtype dt = both_dtypes[d];
                int nd = shapes[s].nd;
                const int64_t *sh = shapes[s].s;
                int64_t n = numel_of(nd, sh);
                double *tv = targets(n), g0 = -1.25, *init = beta ? pattern(n, 63) : NULL;
                struct dual x = dual_new(be, dt, nd, sh, 64), y = dual_of(dt, nd, sh, tv),
                            g = dual_of(dt, 1, one, &g0);
                struct guarded o = out_new(be, dt, nd, sh, init);
                cr_assert_eq(be_cpu()->k->bce_logits_backward(be_cpu(), x.c, y.c, g.c, o.c, beta,
                                                              &e), 0);
                cr_assert_eq(be->k->bce_logits_backward(be, x.g, y.g, g.g, o.g, beta, &e), 0,
                             "%s", e.msg);
                out_check(&o, TOL_LIBM(dt), 1e-6, "d bce with logits");
                out_free(&o);
                dual_free(x);
                dual_free(y);
                dual_free(g);
                free(tv);
                free(init);
            }
}

/* The fused linear step on x = batch[:, 1:1+f] and y = batch[:, 0], as the trainer calls it. */
static void check_linear_mse(enum tensor_dtype dt, int64_t n, int64_t f, bool transposed_x)
{
    struct err e = {0};
    const int64_t bs[] = {n, f + 1}, ts[] = {f, n}, ws[] = {f, 1}, one[] = {1, 1}, l1[] = {1};
    struct dual batch = dual_new(be, dt, 2, bs, 65);
    struct dual y = dual_select(batch, 1, 0), xs = dual_slice(batch, 1, 1, f + 1);
    struct dual xt = dual_new(be, dt, 2, ts, 66);
    struct tensor xtc = transposed(xt.c), xtg = transposed(xt.g);
    const struct tensor *xc = transposed_x ? &xtc : xs.c, *xg = transposed_x ? &xtg : xs.g;
    double *wv = pattern(f, 67), bv = 0.3;
    for (int64_t j = 0; j < f; j++)
        wv[j] *= 0.5;
    struct dual w = dual_of(dt, 2, ws, wv), b = dual_of(dt, 2, one, &bv);
    struct guarded loss = out_new(be, dt, 1, l1, NULL), gw = out_new(be, dt, 2, ws, NULL),
                   gb = out_new(be, dt, 2, one, NULL);
    cr_assert_eq(be_cpu()->k->linear_mse(be_cpu(), xc, w.c, b.c, y.c, loss.c, gw.c, gb.c, &e), 0,
                 "%s", e.msg);
    cr_assert_eq(be->k->linear_mse(be, xg, w.g, b.g, y.g, loss.g, gw.g, gb.g, &e), 0, "%s",
                 e.msg);
    char what[96];
    snprintf(what, sizeof what, "linear_mse %s n %lld f %lld%s", tensor_dtype_name(dt),
             (long long)n, (long long)f, transposed_x ? " (x transposed)" : "");
    out_check(&loss, TOL_ROWSUM(dt), 1e-9, what);
    out_check(&gw, TOL_ROWSUM(dt), 1e-3, what);
    out_check(&gb, TOL_ROWSUM(dt), 1e-3, what);
    out_free(&loss);
    out_free(&gw);
    out_free(&gb);
    dual_free(w);
    dual_free(b);
    dual_free(xt);
    dual_free(xs);
    dual_free(y);
    dual_free(batch);
    free(wv);
}

Test(conformance_nn, linear_mse_in_one_and_two_passes_and_on_strided_x)
{
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        check_linear_mse(dt, 1, 8, false);
        check_linear_mse(dt, 1000, 8, false);    /* the DC-taxi shape, one chunk */
        check_linear_mse(dt, 20011, 8, false);   /* several chunks: partials, then totals */
        check_linear_mse(dt, 20011, 3, false);
        check_linear_mse(dt, 1001, 5, true);     /* no unit column stride */
        check_linear_mse(dt, 3001, 13, false);   /* 15 sums: two blocks per chunk */
        check_linear_mse(dt, 777, 29, true);     /* 31 sums, one chunk, strided */
    }
}

/* Fixed trees, no atomics: the same inputs twice give the same bits. */
Test(conformance_nn, losses_are_bit_identical_run_to_run)
{
    struct err e = {0};
    const int64_t sh[] = {20011, 5}, wide[] = {9, 300}, one[] = {1};
    const int64_t *shp[] = {sh, wide};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++) {
            enum tensor_dtype dt = both_dtypes[d];
            int64_t n = shp[k][0] * shp[k][1];
            double *tv = targets(n), v[2][2];
            struct dual block, x = dual_new(be, dt, 2, shp[k], 68),
                               y = dual_of(dt, 2, shp[k], tv);
            struct dual l = labels_new(dt, shp[k][0], shp[k][1], &block);
            struct tensor *o = tensor_on(be, dt, 1, one, NULL);
            for (int r = 0; r < 2; r++) {
                cr_assert_eq(be->k->xent(be, x.g, l.g, o, &e), 0, "%s", e.msg);
                cr_assert_eq(tensor_copy_to_host_f64(o, &v[r][0], &e), 0, "%s", e.msg);
                cr_assert_eq(be->k->bce_logits(be, x.g, y.g, o, &e), 0, "%s", e.msg);
                cr_assert_eq(tensor_copy_to_host_f64(o, &v[r][1], &e), 0, "%s", e.msg);
            }
            cr_expect(memcmp(&v[0][0], &v[1][0], sizeof(double)) == 0,
                      "cross entropy %.17g then %.17g", v[0][0], v[1][0]);
            cr_expect(memcmp(&v[0][1], &v[1][1], sizeof(double)) == 0, "bce %.17g then %.17g",
                      v[0][1], v[1][1]);
            tensor_free(o);
            dual_free(x);
            dual_free(y);
            dual_free(l);
            dual_free(block);
            free(tv);
        }
}

/* test_conformance.c checks supports(); here, that no entry it vouches for is missing. */
Test(conformance_nn, every_entry_core_added_for_mlps_is_filled)
{
    const struct be_kernels *k = be->k;
    cr_expect(k->act && k->act_backward && k->softmax && k->softmax_backward && k->xent &&
              k->xent_backward && k->bce_logits && k->bce_logits_backward && k->linear_mse &&
              k->bias_act);
}
