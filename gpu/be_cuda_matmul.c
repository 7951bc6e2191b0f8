/* be_cuda_matmul.c — matmul through cuBLAS: row-major strided views mapped onto column-major GEMM. */
#include <limits.h>

#include "be_cuda_impl.h"
#include "cuda_check.h"

/*
 * cuBLAS is column-major and our tensors row-major, so C = A B is computed as
 * C^T = B^T A^T: a row-major matrix with row stride ld is, read column-major, its
 * own transpose with leading dimension ld. The layout rules are the CPU's, from
 * core's tensor_blas_layout: unit column stride -> row-major, ld = row stride; unit
 * row stride -> stored transposed, ld = column stride; anything else (broadcast,
 * 2-D strided) is copied to a contiguous temporary first.
 */

void cuda_blas_close(struct cuda_ctx *c)
{
    if (c->blas)
        (void)c->cublas.destroy(c->blas);
    c->blas = NULL;
}

/*
 * The backend's cuBLAS handle, made by its first matmul, as PyTorch makes its own: a job that
 * multiplies no matrices (the linear baseline's fused kernel) never loads cuBLAS's 150 MB, and
 * a missing cuBLAS fails the job that needs it, not the worker. The handle runs on the compute
 * stream in plain FP32 (no TF32), so float32 results stay comparable with the CPU's.
 */
static int blas_ready(struct cuda_ctx *c, struct err *e)
{
    if (c->blas)
        return 0;
    int rc = gpu_cublas_load(&c->cublas, e);
    if (rc)
        return rc;
    cublasStatus_t st = c->cublas.create(&c->blas);
    if (st == CUBLAS_STATUS_ALLOC_FAILED) {   /* its workspace: the cache may hold the memory */
        if ((rc = gpu_alloc_empty_cache(c->alloc, e)))
            return rc;
        st = c->cublas.create(&c->blas);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        return gpu_cublas_fail(e, __FILE__, __LINE__, "cublasCreate", st);
    }
    CUBLAS_TRY(e, rc, fail, c->cublas.set_stream(c->blas, c->compute));
    CUBLAS_TRY(e, rc, fail, c->cublas.set_math_mode(c->blas, CUBLAS_DEFAULT_MATH));
    return 0;
fail:
    cuda_blas_close(c);
    return rc;
}

/* A contiguous (rows, cols) temporary on the device, from the backend's cache. */
static struct tensor *temp_like(struct cuda_ctx *c, const struct tensor *t, struct err *e)
{
    size_t bytes = (size_t)(t->shape[0] * t->shape[1]) * tensor_dtype_size(t->dtype);
    void *p = gpu_alloc_get(c->alloc, bytes, e);
    if (!p)
        return NULL;
    struct tensor *v = tensor_wrap(&c->be, p, t->dtype, 2, t->shape, NULL, e);
    if (!v)
        gpu_alloc_put(c->alloc, p);
    return v;
}

static void temp_free(struct cuda_ctx *c, struct tensor *t)
{
    if (t) {
        gpu_alloc_put(c->alloc, t->data);
        tensor_free(t);
    }
}

/* t itself if cuBLAS can read it, else a contiguous copy (*tmp, freed by the caller). */
static const struct tensor *readable(struct cuda_ctx *c, const struct tensor *t, bool *trans,
                                     int *ld, struct tensor **tmp, struct err *e)
{
    if (tensor_blas_layout(t, trans, ld))
        return t;
    if (!(*tmp = temp_like(c, t, e)) || cuda_copy_strided(c, t, *tmp, e))
        return NULL;
    tensor_blas_layout(*tmp, trans, ld);
    return *tmp;
}

static int gemm(struct cuda_ctx *c, const struct tensor *a, bool ta, int lda,
                const struct tensor *b, bool tb, int ldb, struct tensor *out, int ldc,
                double beta, struct err *e)
{
    int M = (int)a->shape[0], K = (int)a->shape[1], N = (int)b->shape[1];
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* C (M, N) row-major = C^T (N, M) column-major = op(B)^T (N, K) @ op(A)^T (K, M) */
    if (a->dtype == TENSOR_F64) {
        const double one = 1.0;
        CUBLAS_CHECK(e, c->cublas.dgemm(c->blas, opb, opa, N, M, K, &one,
                                        (const double *)b->data, ldb, (const double *)a->data,
                                        lda, &beta, (double *)out->data, ldc));
    } else {
        const float one = 1.0f, fb = (float)beta;
        CUBLAS_CHECK(e, c->cublas.sgemm(c->blas, opb, opa, N, M, K, &one,
                                        (const float *)b->data, ldb, (const float *)a->data,
                                        lda, &fb, (float *)out->data, ldc));
    }
    return 0;
}

// a (M, K), b (K, N), any strides -> out (M, N) = a @ b + beta * out
int cuda_k_matmul(const struct backend *be, const struct tensor *a, const struct tensor *b,
                  struct tensor *out, double beta, struct err *e)
{
    struct cuda_ctx *c = cuda_ctx_of(be);
    int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
    struct tensor *ca = NULL, *cb = NULL, *co = NULL;
    bool ta = false, tb = false, to = false;
    int lda = 1, ldb = 1, ldc = 1;
    int rc = cuda_enter(c, e);
    if (rc || M == 0 || N == 0)
        return rc;
    if (K == 0) {   /* an empty sum: out = beta * out */
        struct gk_iter it;
        const int64_t *st[] = {out->stride};
        cuda_iter_make(&it, 2, out->shape, 1, st);
        return CUDA_LAUNCHED(e, "matmul", gk_fill(c->compute,
                                                  a->dtype == TENSOR_F64 ? GK_F64 : GK_F32,
                                                  it, out->data, beta, beta != 0));
    }
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return err_set(e, ERR_INVALID_ARG, "matmul: dimension over %d", INT_MAX);
    if ((rc = blas_ready(c, e))) {
        err_prefix(e, "matmul");
        return rc;
    }
    if (!(a = readable(c, a, &ta, &lda, &ca, e)) || !(b = readable(c, b, &tb, &ldb, &cb, e))) {
        rc = e && e->code ? e->code : ERR_DEVICE;
        goto done;
    }
    struct tensor *dst = out;
    if (!tensor_blas_layout(out, &to, &ldc) || to) {
        if (!(dst = co = temp_like(c, out, e)) || (beta != 0 && cuda_copy_strided(c, out, co, e))) {
            rc = e && e->code ? e->code : ERR_DEVICE;
            goto done;
        }
        tensor_blas_layout(co, &to, &ldc);
    }
    rc = gemm(c, a, ta, lda, b, tb, ldb, dst, ldc, beta, e);
    if (!rc && co)
        rc = cuda_copy_strided(c, co, out, e);
done:
    temp_free(c, ca);
    temp_free(c, cb);
    temp_free(c, co);
    return rc;
}
