/* test_matmul_optim.c — cuBLAS matmul over every layout core passes, and the fused SGD/Adam updates, against the CPU. */
#include "conformance.h"

GPU_SUITE(matmul_optim, 120);

static struct tensor transposed(const struct tensor *t)
{
    struct tensor v = *t;
    v.shape[0] = t->shape[1];
    v.shape[1] = t->shape[0];
    v.stride[0] = t->stride[1];
    v.stride[1] = t->stride[0];
    return v;
}

/* out (M, N) (+)= a @ b on both backends; out_t: out is a transposed view (cuBLAS needs a temp). */
static void check_matmul(enum tensor_dtype dt, const struct tensor *ac, const struct tensor *ag,
                         const struct tensor *bc, const struct tensor *bg, double beta,
                         bool out_t, const char *what)
{
    struct err e = {0};
    int64_t M = ac->shape[0], N = bc->shape[1];
    int64_t shape[2] = {out_t ? N : M, out_t ? M : N};
    double *init = beta != 0 ? pattern(M * N, 30) : NULL;
    struct guarded o = out_new(be, dt, 2, shape, init);
    struct tensor oc = out_t ? transposed(o.c) : *o.c, og = out_t ? transposed(o.g) : *o.g;
    cr_assert_eq(be_cpu()->k->matmul(be_cpu(), ac, bc, &oc, beta, &e), 0, "%s", e.msg);
    cr_assert_eq(be->k->matmul(be, ag, bg, &og, beta, &e), 0, "%s: %s", what, e.msg);
    char w[128];
    snprintf(w, sizeof w, "%s (%s)", what, tensor_dtype_name(dt));
    out_check(&o, TOL_GEMM(dt), EPS_GEMM, w);
    out_free(&o);
    free(init);
}

Test(matmul_optim, small_and_one_by_one_products)
{
    const int64_t s7x3[] = {7, 3}, s3x4[] = {3, 4}, s1x1[] = {1, 1}, s1x13[] = {1, 13},
                  s13x5[] = {13, 5};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        struct dual a = dual_new(be, dt, 2, s7x3, 31), b = dual_new(be, dt, 2, s3x4, 32);
        check_matmul(dt, a.c, a.g, b.c, b.g, 0, false, "(7, 3) @ (3, 4)");
        check_matmul(dt, a.c, a.g, b.c, b.g, 1, false, "(7, 3) @ (3, 4) + out");
        check_matmul(dt, a.c, a.g, b.c, b.g, 0.5, true, "(7, 3) @ (3, 4) into a transposed view");
        struct dual u = dual_new(be, dt, 2, s1x1, 33), v = dual_new(be, dt, 2, s1x1, 34);
        check_matmul(dt, u.c, u.g, v.c, v.g, 0, false, "(1, 1) @ (1, 1)");
        struct dual r = dual_new(be, dt, 2, s1x13, 35), m = dual_new(be, dt, 2, s13x5, 36);
        check_matmul(dt, r.c, r.g, m.c, m.g, 0, false, "(1, 13) @ (13, 5)");
        dual_free(a);
        dual_free(b);
        dual_free(u);
        dual_free(v);
        dual_free(r);
        dual_free(m);
    }
}

/* cuBLAS (about 150 MB resident) comes with the first product, as PyTorch's handle does: a
 * backend, and a job that multiplies no matrices, never loads it. */
Test(matmul_optim, cublas_is_loaded_by_the_first_product_not_by_the_backend)
{
    cr_assert_eq(gpu_cublas_version(), 0, "making cuda:0's backend loaded cuBLAS");
    const int64_t s2x3[] = {2, 3}, s3x2[] = {3, 2};
    struct dual a = dual_new(be, TENSOR_F32, 2, s2x3, 31), b = dual_new(be, TENSOR_F32, 2, s3x2, 32);
    check_matmul(TENSOR_F32, a.c, a.g, b.c, b.g, 0, false, "the first product");
    cr_expect_gt(gpu_cublas_version(), 0, "no cuBLAS in the process after a product");
    dual_free(a);
    dual_free(b);
}

/* The linear model's three products: X @ w forward, dC @ w^T and X^T @ dC backward. */
Test(matmul_optim, linear_model_products_on_a_column_slice)
{
    const int64_t shape[] = {100003, 9}, w8[] = {8, 1}, g1[] = {100003, 1};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        struct dual batch = dual_new(be, dt, 2, shape, 37);
        struct dual x = dual_slice(batch, 1, 1, 9);
        struct dual w = dual_new(be, dt, 2, w8, 38), g = dual_new(be, dt, 2, g1, 39);
        check_matmul(dt, x.c, x.g, w.c, w.g, 0, false, "X @ w");
        struct tensor wtc = transposed(w.c), wtg = transposed(w.g);
        check_matmul(dt, g.c, g.g, &wtc, &wtg, 0, false, "dC @ w^T");
        struct tensor xtc = transposed(x.c), xtg = transposed(x.g);
        check_matmul(dt, &xtc, &xtg, g.c, g.g, 1, false, "X^T @ dC, accumulated");
        dual_free(x);
        dual_free(w);
        dual_free(g);
        dual_free(batch);
    }
}

/* A broadcast operand (stride 0) and a 2-D strided one go through a contiguous copy. */
Test(matmul_optim, layouts_cublas_cannot_read_are_copied_first)
{
    struct err e = {0};
    const int64_t s13x5[] = {13, 5}, s26x10[] = {26, 10}, row[] = {1, 5}, s5x4[] = {5, 4};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        struct dual r = dual_new(be, dt, 2, row, 40);
        struct tensor rc = bcast(r.c, 2, s13x5), rg = bcast(r.g, 2, s13x5);
        struct dual b = dual_new(be, dt, 2, s5x4, 41);
        check_matmul(dt, &rc, &rg, b.c, b.g, 0, false, "broadcast rows @ (5, 4)");
        /* every other row and column of (26, 10): neither stride is the element size */
        struct dual big = dual_new(be, dt, 2, s26x10, 42);
        struct tensor sc = *big.c, sg = *big.g;
        sc.shape[0] = sg.shape[0] = 13;
        sc.shape[1] = sg.shape[1] = 5;
        sc.stride[0] *= 2; sg.stride[0] *= 2;
        sc.stride[1] *= 2; sg.stride[1] *= 2;
        check_matmul(dt, &sc, &sg, b.c, b.g, 0, false, "2-D strided @ (5, 4)");
        dual_free(r);
        dual_free(b);
        dual_free(big);
        (void)e;
    }
}

Test(matmul_optim, empty_inner_dimension_scales_the_output_by_beta)
{
    const int64_t s3x0[] = {3, 0}, s0x4[] = {0, 4};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        struct dual a = dual_new(be, dt, 2, s3x0, 43), b = dual_new(be, dt, 2, s0x4, 44);
        check_matmul(dt, a.c, a.g, b.c, b.g, 0, false, "(3, 0) @ (0, 4)");
        check_matmul(dt, a.c, a.g, b.c, b.g, 0.5, false, "(3, 0) @ (0, 4) + 0.5 out");
        dual_free(a);
        dual_free(b);
    }
}

/*
 * A clip folded into the updates (max_norm > 0): both sides read the CPU's sum of squares
 * of g, the GPU's as a device double, so the fold itself is what is compared.
 */
struct folded_clip {
    struct be_clip cpu, gpu;
    double sumsq;
    struct tensor *dev;
};

static void folded_clip_make(struct folded_clip *fc, struct dual g, double max_norm)
{
    struct err e = {0};
    const int64_t one[] = {1};
    *fc = (struct folded_clip){0};
    if (max_norm <= 0)
        return;
    cr_assert_eq(be_cpu()->k->sumsq_dev(be_cpu(), g.c, &fc->sumsq, &e), 0);
    fc->dev = tensor_on(be, TENSOR_F64, 1, one, &fc->sumsq);
    fc->cpu = (struct be_clip){&fc->sumsq, max_norm};
    fc->gpu = (struct be_clip){(const double *)fc->dev->data, max_norm};
}

/* Three steps of an optimizer on both backends over the same p, g; buffers compared after each. */
static void check_sgd(enum tensor_dtype dt, const struct be_sgd_args *args, bool momentum,
                      double max_norm)
{
    struct err e = {0};
    const int64_t n[] = {1000003};
    struct dual p = dual_new(be, dt, 1, n, 50), g = dual_new(be, dt, 1, n, 51);
    struct dual buf = {0};
    struct folded_clip fc;
    folded_clip_make(&fc, g, max_norm);
    if (momentum)
        buf = dual_new(be, dt, 1, n, 52);
    for (int step = 0; step < 3; step++) {
        struct be_sgd_args a = *args;
        a.first = step == 0;
        a.clip = fc.cpu;
        cr_assert_eq(be_cpu()->k->sgd(be_cpu(), p.c, g.c, buf.c, &a, &e), 0);
        a.clip = fc.gpu;
        cr_assert_eq(be->k->sgd(be, p.g, g.g, buf.g, &a, &e), 0, "%s", e.msg);
    }
    tensor_free(fc.dev);
    double *pc = values_of(p.c), *pg = values_of(p.g);
    expect_close(pg, pc, n[0], TOL_ELEM(dt), EPS(dt), "sgd parameters");
    free(pc);
    free(pg);
    if (momentum) {
        double *bc = values_of(buf.c), *bg = values_of(buf.g);
        expect_close(bg, bc, n[0], TOL_ELEM(dt), EPS(dt), "sgd momentum buffer");
        free(bc);
        free(bg);
        dual_free(buf);
    }
    dual_free(p);
    dual_free(g);
}

Test(matmul_optim, sgd_plain_momentum_nesterov_and_weight_decay_match_cpu)
{
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        check_sgd(dt, &(struct be_sgd_args){.lr = 0.03}, false, 0);
        check_sgd(dt, &(struct be_sgd_args){.lr = 0.03, .weight_decay = 0.01}, false, 0);
        check_sgd(dt, &(struct be_sgd_args){.lr = 0.1, .momentum = 0.9}, true, 0);
        check_sgd(dt, &(struct be_sgd_args){.lr = 0.1, .momentum = 0.9, .nesterov = true,
                                            .weight_decay = 1e-4}, true, 0);
    }
}

/* The norm of g is about 580: 0.5 scales every gradient, 1e6 leaves them alone. */
Test(matmul_optim, sgd_with_the_clip_folded_in_matches_cpu)
{
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        check_sgd(dt, &(struct be_sgd_args){.lr = 0.03}, false, 0.5);
        check_sgd(dt, &(struct be_sgd_args){.lr = 0.03}, false, 1e6);
        check_sgd(dt, &(struct be_sgd_args){.lr = 0.1, .momentum = 0.9, .nesterov = true,
                                            .weight_decay = 1e-4}, true, 0.5);
    }
}

static void check_adam(enum tensor_dtype dt, bool decoupled, double wd, double max_norm)
{
    struct err e = {0};
    const int64_t n[] = {1000003};
    struct dual p = dual_new(be, dt, 1, n, 53), g = dual_new(be, dt, 1, n, 54);
    struct dual m = {tensor_on(be_cpu(), dt, 1, n, NULL), tensor_on(be, dt, 1, n, NULL)};
    struct dual v = {tensor_on(be_cpu(), dt, 1, n, NULL), tensor_on(be, dt, 1, n, NULL)};
    struct folded_clip fc;
    folded_clip_make(&fc, g, max_norm);
    for (int step = 1; step <= 3; step++) {
        struct be_adam_args a = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                 .weight_decay = wd, .decoupled = decoupled, .step = step,
                                 .clip = fc.cpu};
        cr_assert_eq(be_cpu()->k->adam(be_cpu(), p.c, g.c, m.c, v.c, &a, &e), 0);
        a.clip = fc.gpu;
        cr_assert_eq(be->k->adam(be, p.g, g.g, m.g, v.g, &a, &e), 0, "%s", e.msg);
    }
    tensor_free(fc.dev);
    struct dual all[] = {p, m, v};
    const char *names[] = {"adam p", "adam m", "adam v"};
    for (int i = 0; i < 3; i++) {
        double *c = values_of(all[i].c), *gv = values_of(all[i].g);
        expect_close(gv, c, n[0], TOL_ELEM(dt), EPS(dt), names[i]);
        free(c);
        free(gv);
        dual_free(all[i]);
    }
    dual_free(g);
}

Test(matmul_optim, adam_and_adamw_three_steps_match_cpu)
{
    for (int d = 0; d < 2; d++) {
        check_adam(both_dtypes[d], false, 0, 0);
        check_adam(both_dtypes[d], false, 0.01, 0);
        check_adam(both_dtypes[d], true, 0.01, 0);
    }
}

Test(matmul_optim, adam_and_adamw_with_the_clip_folded_in_match_cpu)
{
    for (int d = 0; d < 2; d++) {
        check_adam(both_dtypes[d], false, 0.01, 0.5);
        check_adam(both_dtypes[d], true, 0.01, 0.5);
    }
}
