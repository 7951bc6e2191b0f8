/* test_conformance.c — every kernel entry of the CUDA backend against the CPU backend on the same inputs. */
#include "conformance.h"

/* Odd shapes: one element, a short run, a 2-D tile, and a length no block size divides. */
struct shape {
    int nd;
    int64_t s[2];
};
static const struct shape shapes[] = {{1, {1, 0}}, {1, {7, 0}}, {2, {13, 5}}, {1, {1000003, 0}}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

GPU_SUITE(conformance, 120);

static void run_unary(enum be_unop op, const char *name)
{
    struct err e = {0};
    const double ab[][2] = {{1, 0}, {2.5, 0}, {-0.5, 1.5}};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NSHAPES; s++)
            for (int k = 0; k < 3; k++) {
                enum tensor_dtype dt = both_dtypes[d];
                struct dual a = dual_new(be, dt, shapes[s].nd, shapes[s].s, 1);
                double *init = ab[k][1] != 0 ? pattern(tensor_numel(a.c), 2) : NULL;
                struct guarded o = out_new(be, dt, shapes[s].nd, shapes[s].s, init);
                cr_assert_eq(be_cpu()->k->unary(be_cpu(), op, a.c, o.c, ab[k][0], ab[k][1], &e), 0);
                cr_assert_eq(be->k->unary(be, op, a.g, o.g, ab[k][0], ab[k][1], &e), 0, "%s", e.msg);
                char what[96];
                snprintf(what, sizeof what, "%s %s shape %zu alpha %g beta %g", name,
                         tensor_dtype_name(dt), s, ab[k][0], ab[k][1]);
                out_check(&o, TOL_ELEM(dt), EPS(dt), what);
                out_free(&o);
                dual_free(a);
                free(init);
            }
}

Test(conformance, unary_square_over_odd_shapes_with_alpha_and_beta)
{
    run_unary(BE_UN_SQUARE, "square");
}

Test(conformance, binary_ops_over_odd_shapes_with_alpha_and_beta)
{
    struct err e = {0};
    const double ab[][2] = {{1, 0}, {-2, 0}, {0.5, 1}};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NSHAPES; s++)
            for (int op = BE_BIN_ADD; op <= BE_BIN_MUL; op++)
                for (int k = 0; k < 3; k++) {
                    enum tensor_dtype dt = both_dtypes[d];
                    struct dual a = dual_new(be, dt, shapes[s].nd, shapes[s].s, 1);
                    struct dual b = dual_new(be, dt, shapes[s].nd, shapes[s].s, 2);
                    double *init = ab[k][1] != 0 ? pattern(tensor_numel(a.c), 3) : NULL;
                    struct guarded o = out_new(be, dt, shapes[s].nd, shapes[s].s, init);
                    cr_assert_eq(be_cpu()->k->binary(be_cpu(), op, a.c, b.c, o.c, ab[k][0],
                                                     ab[k][1], &e), 0);
                    cr_assert_eq(be->k->binary(be, op, a.g, b.g, o.g, ab[k][0], ab[k][1], &e), 0,
                                 "%s", e.msg);
                    char what[96];
                    snprintf(what, sizeof what, "binary op %d %s shape %zu beta %g", op,
                             tensor_dtype_name(dt), s, ab[k][1]);
                    out_check(&o, TOL_ELEM(dt), EPS(dt), what);
                    out_free(&o);
                    dual_free(a);
                    dual_free(b);
                    free(init);
                }
}

/* (13, 5) op (5): the row broadcast down; (13, 1) op (1, 5): an outer sum; (N, 1) op (1, 1). */
Test(conformance, binary_with_broadcast_operands)
{
    struct err e = {0};
    const int64_t out13x5[] = {13, 5}, row[] = {5}, col[] = {13, 1}, r15[] = {1, 5},
                  n1[] = {1000003, 1}, one[] = {1, 1};
    struct {
        int nda, ndb;
        const int64_t *sa, *sb, *so;
    } cases[] = {
        {2, 1, out13x5, row, out13x5},
        {2, 2, col, r15, out13x5},
        {2, 2, n1, one, n1},
    };
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 3; c++)
            for (int op = BE_BIN_ADD; op <= BE_BIN_MUL; op++) {
                enum tensor_dtype dt = both_dtypes[d];
                struct dual a = dual_new(be, dt, cases[c].nda, cases[c].sa, 4);
                struct dual b = dual_new(be, dt, cases[c].ndb, cases[c].sb, 5);
                struct guarded o = out_new(be, dt, 2, cases[c].so, NULL);
                struct tensor ac = bcast(a.c, 2, cases[c].so), ag = bcast(a.g, 2, cases[c].so),
                              bc = bcast(b.c, 2, cases[c].so), bg = bcast(b.g, 2, cases[c].so);
                cr_assert_eq(be_cpu()->k->binary(be_cpu(), op, &ac, &bc, o.c, 1, 0, &e), 0);
                cr_assert_eq(be->k->binary(be, op, &ag, &bg, o.g, 1, 0, &e), 0, "%s", e.msg);
                char what[96];
                snprintf(what, sizeof what, "broadcast case %d op %d %s", c, op,
                         tensor_dtype_name(dt));
                out_check(&o, TOL_ELEM(dt), EPS(dt), what);
                out_free(&o);
                dual_free(a);
                dual_free(b);
            }
}

/* X = batch[:, 1:] and y = batch[:, 0] of an (N, 9) batch, the DC-taxi layout, read in place. */
Test(conformance, binary_and_unary_on_column_slices_of_a_batch)
{
    struct err e = {0};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        const int64_t shape[] = {4099, 9}, xs[] = {4099, 8};
        struct dual batch = dual_new(be, dt, 2, shape, 6);
        struct dual x = dual_slice(batch, 1, 1, 9), y = dual_slice(batch, 1, 0, 1);
        struct tensor yc = bcast(y.c, 2, xs), yg = bcast(y.g, 2, xs);
        struct guarded o = out_new(be, dt, 2, xs, NULL);
        cr_assert_eq(be_cpu()->k->binary(be_cpu(), BE_BIN_SUB, x.c, &yc, o.c, 1, 0, &e), 0);
        cr_assert_eq(be->k->binary(be, BE_BIN_SUB, x.g, &yg, o.g, 1, 0, &e), 0, "%s", e.msg);
        out_check(&o, TOL_ELEM(dt), EPS(dt), "batch[:, 1:] - batch[:, 0:1]");
        cr_assert_eq(be_cpu()->k->unary(be_cpu(), BE_UN_SQUARE, x.c, o.c, 1, 0, &e), 0);
        cr_assert_eq(be->k->unary(be, BE_UN_SQUARE, x.g, o.g, 1, 0, &e), 0, "%s", e.msg);
        out_check(&o, TOL_ELEM(dt), EPS(dt), "batch[:, 1:] ** 2");
        out_free(&o);
        dual_free(x);
        dual_free(y);
        dual_free(batch);
    }
}

/* Writing into a strided view touches only that view: the other columns stay as they were. */
Test(conformance, outputs_that_are_column_views_leave_other_columns_alone)
{
    struct err e = {0};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = both_dtypes[d];
        const int64_t shape[] = {1001, 9};
        double *init = pattern(1001 * 9, 7);
        struct guarded o = out_new(be, dt, 2, shape, init);
        struct dual a = dual_new(be, dt, 2, (const int64_t[]){1001, 1}, 8);
        struct tensor *cc = tensor_slice(o.c, 1, 3, 4, &e), *cg = tensor_slice(o.g, 1, 3, 4, &e);
        cr_assert(cc && cg);
        cr_assert_eq(be_cpu()->k->unary(be_cpu(), BE_UN_SQUARE, a.c, cc, 1, 0.5, &e), 0);
        cr_assert_eq(be->k->unary(be, BE_UN_SQUARE, a.g, cg, 1, 0.5, &e), 0, "%s", e.msg);
        cr_assert_eq(be_cpu()->k->scale(be_cpu(), cc, -3, &e), 0);
        cr_assert_eq(be->k->scale(be, cg, -3, &e), 0, "%s", e.msg);
        out_check(&o, TOL_ELEM(dt), EPS(dt), "column 3 of (1001, 9)");
        tensor_free(cc);
        tensor_free(cg);
        dual_free(a);
        out_free(&o);
        free(init);
    }
}

Test(conformance, fill_and_scale_over_odd_shapes)
{
    struct err e = {0};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < NSHAPES; s++) {
            enum tensor_dtype dt = both_dtypes[d];
            int64_t n = shapes[s].nd == 1 ? shapes[s].s[0] : shapes[s].s[0] * shapes[s].s[1];
            double *init = pattern(n, 9);
            struct guarded o = out_new(be, dt, shapes[s].nd, shapes[s].s, init);
            cr_assert_eq(be_cpu()->k->scale(be_cpu(), o.c, 0.1, &e), 0);
            cr_assert_eq(be->k->scale(be, o.g, 0.1, &e), 0, "%s", e.msg);
            out_check(&o, TOL_ELEM(dt), EPS(dt), "scale by 0.1");
            cr_assert_eq(be_cpu()->k->fill(be_cpu(), o.c, 1.0 / 3, &e), 0);
            cr_assert_eq(be->k->fill(be, o.g, 1.0 / 3, &e), 0, "%s", e.msg);
            out_check(&o, TOL_ELEM(dt), EPS(dt), "fill with 1/3");
            out_free(&o);
            free(init);
        }
}

Test(conformance, supports_every_op_of_this_table_and_no_other)
{
    for (int op = BE_OP_MATMUL; op <= BE_OP_BIAS_ACT; op++) {
        cr_expect(be->k->supports(be, (enum be_op)op, TENSOR_F64), "op %d f64", op);
        cr_expect(be->k->supports(be, (enum be_op)op, TENSOR_F32), "op %d f32", op);
    }
    cr_expect_not(be->k->supports(be, (enum be_op)(BE_OP_BIAS_ACT + 100), TENSOR_F32));
    cr_expect_str_eq(be->name, "cuda:0");
    cr_expect(be_cuda_is(be));
    cr_expect_not(be_cuda_is(be_cpu()));
}
