/* test_reduce.c — the CUDA backend's sums (reduce, sumsq, mse) against the CPU's, and their determinism. */
#include "conformance.h"

GPU_SUITE(reduce, 120);

/* reduce src of shape ss (a view of it when col >= 0: column col of (rows, 9)) into dst shape ds. */
static void check_reduce(enum tensor_dtype dt, int nd, const int64_t *ss, const int64_t *ds,
                         double alpha, double beta, double div, const char *what)
{
    struct err e = {0};
    struct dual src = dual_new(be, dt, nd, ss, 11);
    int64_t nd_out = 1;
    for (int i = 0; i < nd; i++)
        nd_out *= ds[i];
    double *init = beta != 0 ? pattern(nd_out, 12) : NULL;
    struct guarded o = out_new(be, dt, nd, ds, init);
    cr_assert_eq(be_cpu()->k->reduce(be_cpu(), src.c, o.c, alpha, beta, div, &e), 0);
    cr_assert_eq(be->k->reduce(be, src.g, o.g, alpha, beta, div, &e), 0, "%s: %s", what, e.msg);
    char w[128];
    snprintf(w, sizeof w, "%s (%s)", what, tensor_dtype_name(dt));
    out_check(&o, TOL_SUM(dt), 1e-3, w);
    out_free(&o);
    dual_free(src);
    free(init);
}

Test(reduce, full_sums_and_means_of_odd_lengths)
{
    const int64_t lens[] = {1, 7, 17, 8193, 1000003}, one[] = {1};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 5; i++) {
            check_reduce(both_dtypes[d], 1, &lens[i], one, 1, 0, 1, "sum");
            check_reduce(both_dtypes[d], 1, &lens[i], one, 1, 0, (double)lens[i], "mean");
            check_reduce(both_dtypes[d], 1, &lens[i], one, -0.5, 1, 3, "beta 1 accumulation");
        }
}

Test(reduce, over_one_dimension_of_2d_tiles)
{
    const int64_t s13x5[] = {13, 5}, r1x5[] = {1, 5}, r13x1[] = {13, 1}, s3xbig[] = {3, 100003},
                  r3x1[] = {3, 1}, sbigx3[] = {100003, 3}, r1x3[] = {1, 3}, s1x1[] = {1, 1};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        check_reduce(dt, 2, s13x5, r1x5, 1, 0, 1, "(13, 5) over dim 0");
        check_reduce(dt, 2, s13x5, r13x1, 1, 1, 1, "(13, 5) over dim 1, accumulated");
        check_reduce(dt, 2, s13x5, s1x1, 2, 0, 65, "(13, 5) over both dims");
        check_reduce(dt, 2, s3xbig, r3x1, 1, 0, 1, "(3, 100003) over dim 1 (two passes)");
        check_reduce(dt, 2, sbigx3, r1x3, 1, 0, 1, "(100003, 3) over dim 0 (strided sums)");
    }
}

Test(reduce, copy_axpy_and_broadcast_without_summed_dims)
{
    struct err e = {0};
    const int64_t s13x5[] = {13, 5}, row[] = {1, 5};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        check_reduce(dt, 2, s13x5, s13x5, 1, 0, 1, "copy");
        check_reduce(dt, 2, s13x5, s13x5, -2, 1, 4, "axpy");
        /* a (1, 5) row spread over (13, 5) through stride 0 */
        struct dual r = dual_new(be, dt, 2, row, 13);
        struct tensor rc = bcast(r.c, 2, s13x5), rg = bcast(r.g, 2, s13x5);
        struct guarded o = out_new(be, dt, 2, s13x5, NULL);
        cr_assert_eq(be_cpu()->k->reduce(be_cpu(), &rc, o.c, 1, 0, 13, &e), 0);
        cr_assert_eq(be->k->reduce(be, &rg, o.g, 1, 0, 13, &e), 0, "%s", e.msg);
        out_check(&o, TOL_ELEM(dt), EPS(dt), "broadcast row");
        out_free(&o);
        dual_free(r);
    }
}

/* The bias gradient of the linear model: sum over a strided column into (1, 1). */
Test(reduce, sum_of_a_strided_column_of_a_batch)
{
    struct err e = {0};
    const int64_t shape[] = {1000003, 9}, one[] = {1, 1};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        struct dual batch = dual_new(be, dt, 2, shape, 14);
        struct dual col = dual_slice(batch, 1, 4, 5);
        struct guarded o = out_new(be, dt, 2, one, NULL);
        cr_assert_eq(be_cpu()->k->reduce(be_cpu(), col.c, o.c, 1, 0, 1, &e), 0);
        cr_assert_eq(be->k->reduce(be, col.g, o.g, 1, 0, 1, &e), 0, "%s", e.msg);
        out_check(&o, TOL_SUM(dt), 1e-3, "sum of batch[:, 4:5]");
        out_free(&o);
        dual_free(col);
        dual_free(batch);
    }
}

Test(reduce, sumsq_matches_cpu_on_contiguous_and_strided)
{
    struct err e = {0};
    const int64_t lens[] = {1, 7, 1000003}, shape[] = {4099, 9};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        for (int i = 0; i < 3; i++) {
            struct dual t = dual_new(be, dt, 1, &lens[i], 15);
            double want, got;
            cr_assert_eq(be_cpu()->k->sumsq(be_cpu(), t.c, &want, &e), 0);
            cr_assert_eq(be->k->sumsq(be, t.g, &got, &e), 0, "%s", e.msg);
            /* both accumulate in double, whatever the dtype */
            expect_close(&got, &want, 1, 1e-12, 0, "sumsq");
            dual_free(t);
        }
        struct dual batch = dual_new(be, dt, 2, shape, 16);
        struct dual x = dual_slice(batch, 1, 1, 9);
        double want, got;
        cr_assert_eq(be_cpu()->k->sumsq(be_cpu(), x.c, &want, &e), 0);
        cr_assert_eq(be->k->sumsq(be, x.g, &got, &e), 0, "%s", e.msg);
        expect_close(&got, &want, 1, 1e-12, 0, "sumsq of batch[:, 1:]");
        dual_free(x);
        dual_free(batch);
    }
}

Test(reduce, mse_matches_cpu_with_a_strided_target)
{
    struct err e = {0};
    const int64_t lens[] = {1, 7, 1000003};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 3; i++) {
            enum tensor_dtype dt = both_dtypes[d];
            const int64_t shape[] = {lens[i], 9}, one[] = {1};
            struct dual batch = dual_new(be, dt, 2, shape, 17);
            struct dual y = dual_select(batch, 1, 0);
            struct dual p = dual_new(be, dt, 1, &lens[i], 18);
            struct guarded o = out_new(be, dt, 0, one, NULL);
            cr_assert_eq(be_cpu()->k->mse(be_cpu(), p.c, y.c, o.c, &e), 0);
            cr_assert_eq(be->k->mse(be, p.g, y.g, o.g, &e), 0, "%s", e.msg);
            out_check(&o, TOL_SUM(dt), 0, "mse(pred, batch[:, 0])");
            out_free(&o);
            dual_free(p);
            dual_free(y);
            dual_free(batch);
        }
}

Test(reduce, mse_backward_matches_cpu_for_both_gradients)
{
    struct err e = {0};
    const int64_t lens[] = {1, 7, 1000003};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 3; i++)
            for (int beta = 0; beta <= 1; beta++) {
                enum tensor_dtype dt = both_dtypes[d];
                const int64_t shape[] = {lens[i], 9}, one[] = {1};
                struct dual batch = dual_new(be, dt, 2, shape, 19);
                struct dual y = dual_select(batch, 1, 0);
                struct dual p = dual_new(be, dt, 1, &lens[i], 20);
                double g0 = 0.75;
                struct tensor *gc = tensor_on(be_cpu(), dt, 0, one, &g0),
                              *gg = tensor_on(be, dt, 0, one, &g0);
                double *init = beta ? pattern(lens[i], 21) : NULL;
                struct guarded gp = out_new(be, dt, 1, &lens[i], init),
                               gt = out_new(be, dt, 1, &lens[i], init);
                cr_assert_eq(be_cpu()->k->mse_backward(be_cpu(), p.c, y.c, gc, gp.c, beta, gt.c,
                                                       beta, &e), 0);
                cr_assert_eq(be->k->mse_backward(be, p.g, y.g, gg, gp.g, beta, gt.g, beta, &e),
                             0, "%s", e.msg);
                out_check(&gp, TOL_ELEM(dt), EPS(dt), "d pred");
                out_check(&gt, TOL_ELEM(dt), EPS(dt), "d target");
                out_free(&gp);
                out_free(&gt);
                tensor_free(gc);
                tensor_free(gg);
                dual_free(p);
                dual_free(y);
                dual_free(batch);
                free(init);
            }
}

/* No atomics, a fixed tree: the same sum twice is the same bits. */
Test(reduce, sums_are_bit_identical_run_to_run)
{
    struct err e = {0};
    const int64_t n[] = {1000003}, one[] = {1};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        struct dual t = dual_new(be, dt, 1, n, 22);
        struct tensor *o = tensor_on(be, dt, 1, one, NULL);
        double s1, s2, q1, q2;
        for (int r = 0; r < 2; r++) {
            cr_assert_eq(be->k->reduce(be, t.g, o, 1, 0, 1, &e), 0, "%s", e.msg);
            double *v = values_of(o);
            *(r ? &s2 : &s1) = v[0];
            free(v);
            cr_assert_eq(be->k->sumsq(be, t.g, r ? &q2 : &q1, &e), 0, "%s", e.msg);
        }
        cr_expect(memcmp(&s1, &s2, sizeof s1) == 0, "sum %.17g then %.17g", s1, s2);
        cr_expect(memcmp(&q1, &q2, sizeof q1) == 0, "sumsq %.17g then %.17g", q1, q2);
        tensor_free(o);
        dual_free(t);
    }
}
