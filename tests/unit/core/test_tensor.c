/* test_tensor.c — views, strides, reshape, reference counting and host copies. */
#include "helpers.h"

static struct tensor *batch_n9(int64_t n)
{
    int64_t shape[2] = {n, 9};
    double *v = malloc(sizeof(double) * (size_t)(n * 9));
    for (int64_t i = 0; i < n * 9; i++)
        v[i] = (double)i;
    struct tensor *t = tensor_from(2, shape, v);
    free(v);
    return t;
}

Test(tensor, new_is_zero_filled_and_contiguous)
{
    struct err e = {0};
    int64_t shape[3] = {2, 3, 5};
    struct tensor *t = tensor_new(be_cpu(), TENSOR_F32, 3, shape, &e);
    cr_assert_not_null(t, "%s", e.msg);
    cr_assert_eq(t->stride[0], 60);
    cr_assert_eq(t->stride[1], 20);
    cr_assert_eq(t->stride[2], 4);
    cr_assert(tensor_is_contiguous(t));
    double *v = host_values(t);
    for (int i = 0; i < 30; i++)
        cr_assert_eq(v[i], 0.0);
    free(v);
    tensor_free(t);
}

Test(tensor, column_slice_of_batch_is_a_strided_view)
{
    struct err e = {0};
    struct tensor *b = batch_n9(5);
    struct tensor *x = tensor_slice(b, 1, 1, 9, &e);
    cr_assert_not_null(x, "%s", e.msg);
    cr_assert_eq(x->ndim, 2);
    cr_assert_eq(x->shape[0], 5);
    cr_assert_eq(x->shape[1], 8);
    cr_assert_eq(x->stride[0], 72);
    cr_assert_eq(x->stride[1], 8);
    cr_assert_eq(x->data, b->data + 8);
    cr_assert_not(tensor_is_contiguous(x));
    double *v = host_values(x);
    cr_assert_eq(v[0], 1.0);
    cr_assert_eq(v[8], 10.0);  /* row 1, column 1 of the batch */
    free(v);
    tensor_free(x);
    tensor_free(b);
}

Test(tensor, select_drops_the_dimension)
{
    struct err e = {0};
    struct tensor *b = batch_n9(4);
    struct tensor *y = tensor_select(b, 1, 0, &e);
    cr_assert_not_null(y, "%s", e.msg);
    cr_assert_eq(y->ndim, 1);
    cr_assert_eq(y->shape[0], 4);
    cr_assert_eq(y->stride[0], 72);
    double *v = host_values(y);
    cr_assert_eq(v[3], 27.0);
    free(v);
    tensor_free(y);
    tensor_free(b);
}

Test(tensor, views_share_memory_with_their_base)
{
    struct err e = {0};
    struct tensor *b = batch_n9(3);
    struct tensor *x = tensor_slice(b, 0, 1, 3, &e);
    double one = -5;
    ((double *)b->data)[9 + 2] = one;   /* batch[1, 2] */
    double *v = host_values(x);
    cr_assert_eq(v[2], -5.0);
    free(v);
    tensor_free(x);
    tensor_free(b);
}

Test(tensor, buffer_outlives_a_freed_base)
{
    struct err e = {0};
    struct tensor *b = batch_n9(3);
    struct tensor *y = tensor_select(b, 1, 4, &e);
    tensor_free(b);
    double *v = host_values(y);  /* ASan would flag a use after free */
    cr_assert_eq(v[0], 4.0);
    cr_assert_eq(v[2], 22.0);
    free(v);
    tensor_free(y);
}

Test(tensor, reshape_view_of_contiguous)
{
    struct err e = {0};
    int64_t s1[2] = {2, 6}, s2[3] = {3, 2, 2};
    struct tensor *t = tensor_pattern(2, s1, 1);
    struct tensor *r = tensor_reshape_view(t, 3, s2, &e);
    cr_assert_not_null(r, "%s", e.msg);
    cr_assert_eq(r->data, t->data);
    cr_assert_eq(r->stride[0], 32);
    cr_assert_eq(r->stride[1], 16);
    cr_assert_eq(r->stride[2], 8);
    tensor_free(r);
    tensor_free(t);
}

Test(tensor, reshape_view_refuses_strided_and_wrong_numel)
{
    struct err e = {0};
    int64_t s[2] = {5, 8}, bad[1] = {41};
    struct tensor *b = batch_n9(5);
    struct tensor *x = tensor_slice(b, 1, 1, 9, &e);
    cr_assert_null(tensor_reshape_view(x, 2, s, &e));
    cr_assert_eq(e.code, ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "not contiguous"), "%s", e.msg);
    cr_assert_null(tensor_reshape_view(b, 1, bad, &e));
    cr_assert(strstr(e.msg, "45 elements"), "%s", e.msg);
    tensor_free(x);
    tensor_free(b);
}

Test(tensor, item_reads_the_single_element)
{
    struct err e = {0};
    int64_t s[2] = {1, 1};
    double v = 3.25, out = 0;
    struct tensor *t = tensor_from(2, s, &v);
    cr_assert_eq(tensor_item(t, &out, &e), 0);
    cr_assert_eq(out, 3.25);
    struct tensor *b = batch_n9(2);
    cr_assert_eq(tensor_item(b, &out, &e), ERR_INVALID_ARG);
    cr_assert(strstr(e.msg, "(2, 9)"), "%s", e.msg);
    tensor_free(b);
    tensor_free(t);
}

Test(tensor, wrap_borrows_memory_with_given_strides)
{
    struct err e = {0};
    double mem[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {3, 2}, stride[2] = {8, 24};   /* the transpose of a (2, 3) */
    struct tensor *t = tensor_wrap(be_cpu(), mem, TENSOR_F64, 2, shape, stride, &e);
    cr_assert_not_null(t, "%s", e.msg);
    cr_assert_null(t->buf);
    double *v = host_values(t);
    double want[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(v[i], want[i]);
    free(v);
    tensor_free(t);
}

Test(tensor, shape_str_reads_like_python)
{
    char s[64];
    int64_t a[2] = {1048576, 8}, b[1] = {7};
    struct tensor *t = tensor_wrap(be_cpu(), s, TENSOR_F64, 2, a, NULL, NULL);
    cr_assert_str_eq(tensor_shape_str(t, s, sizeof s), "(1048576, 8)");
    tensor_free(t);
    t = tensor_wrap(be_cpu(), s, TENSOR_F64, 1, b, NULL, NULL);
    cr_assert_str_eq(tensor_shape_str(t, s, sizeof s), "(7,)");
    tensor_free(t);
}

Test(tensor, dtype_names_round_trip)
{
    enum tensor_dtype dt;
    cr_assert_eq(tensor_dtype_parse("float32", &dt), 0);
    cr_assert_eq(dt, TENSOR_F32);
    cr_assert_eq(tensor_dtype_parse("float64", &dt), 0);
    cr_assert_str_eq(tensor_dtype_name(dt), "float64");
    cr_assert_eq(tensor_dtype_parse("int8", &dt), ERR_INVALID_ARG);
}

Test(tensor, f32_values_convert_on_copy)
{
    struct err e = {0};
    int64_t s[1] = {3};
    double in[3] = {0.5, -2, 1e-3}, out[3];
    struct tensor *t = tensor_new(be_cpu(), TENSOR_F32, 1, s, &e);
    cr_assert_eq(tensor_copy_from_host_f64(t, in, &e), 0);
    cr_assert_eq(tensor_copy_to_host_f64(t, out, &e), 0);
    cr_assert_eq(out[1], -2.0);
    cr_assert_eq(out[2], (double)1e-3f);
    tensor_free(t);
}
