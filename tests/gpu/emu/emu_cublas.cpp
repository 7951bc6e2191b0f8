/* emu_cublas.cpp — the host emulation's cuBLAS: column-major GEMM on the handle's stream, device ranges checked. */
#include "emu_cuda.h"

#include <cublas_api.h>
#include <stdlib.h>

extern "C" {

struct cublasContext {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = (cublasHandle_t)calloc(1, sizeof(struct cublasContext));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t st)
{
    return st == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}

} // extern "C"

namespace {

/* C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C, column-major; beta 0 never reads C. */
template <typename T>
cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha,
                    const T *A, int lda, const T *B, int ldb, T beta, T *C, int ldc)
{
    bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
    if (m < 0 || n < 0 || k < 0 || lda < (na ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
        ldb < (nb ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (gk_emu_lost())   /* its kernel cannot run in a lost context */
        return CUBLAS_STATUS_EXECUTION_FAILED;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    /* the last element each operand reaches must be device memory */
    size_t ea = (size_t)lda * (size_t)((na ? k : m) - 1) + (size_t)(na ? m : k);
    size_t eb = (size_t)ldb * (size_t)((nb ? n : k) - 1) + (size_t)(nb ? k : n);
    size_t ec = (size_t)ldc * (size_t)(n - 1) + (size_t)m;
    if ((k > 0 && (!gk_emu_on_device(A, ea * sizeof(T)) || !gk_emu_on_device(B, eb * sizeof(T)))) ||
        !gk_emu_on_device(C, ec * sizeof(T)))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            T acc = 0;
            for (int l = 0; l < k; l++) {
                T a = na ? A[i + (size_t)l * lda] : A[l + (size_t)i * lda];
                T b = nb ? B[l + (size_t)j * ldb] : B[j + (size_t)l * ldb];
                acc += a * b;
            }
            T *c = &C[i + (size_t)j * ldc];
            *c = beta == 0 ? alpha * acc : alpha * acc + beta * *c;
        }
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cublasStatus_t cublasDgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const double *alpha, const double *A, int lda,
                              const double *B, int ldb, const double *beta, double *C, int ldc)
{
    gk_emu_stream_touch(h->stream);
    return gemm<double>(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc)
{
    gk_emu_stream_touch(h->stream);
    return gemm<float>(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

} // extern "C"
