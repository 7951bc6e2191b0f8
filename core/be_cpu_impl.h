/* be_cpu_impl.h — core-internal: the CPU backend's strided iterator, shared by its kernel files. */
#ifndef TRAIND_CORE_BE_CPU_IMPL_H
#define TRAIND_CORE_BE_CPU_IMPL_H

#include "be_cpu.h"

#define BE_CPU_NOP 4   /* operands one iteration walks at most */

/* Parameters of one kernel call, shared by the inner loops. */
struct lin_ctx {
    int op;
    double alpha, beta, div;
    double acc;                                  /* sums that reach the host */
    int rnd;                                     /* reduced dimensions (reduce) */
    int64_t rshape[TENSOR_MAX_DIMS], rstride[TENSOR_MAX_DIMS];
    int64_t bad;                                 /* first invalid element, or -1 */
    double bad_val;
    int64_t done;                                /* elements visited so far */
};

/* One strided run of n elements: p[o] the first element of operand o, st[o] its byte stride. */
typedef void (*be_cpu_inner_fn)(int64_t n, char *const *p, const int64_t *st, const void *ctx);

/* Runs f64 or f32 (by ops[0]'s dtype) over ops[0]'s shape with every operand's strides, in
 * row-major order, merging dimensions where every operand allows. */
void be_cpu_run(be_cpu_inner_fn f64, be_cpu_inner_fn f32, const struct tensor *const *ops,
                int nop, const void *ctx);

/* The kernels of be_cpu_nn.c, for the table in be_cpu.c. */
int be_cpu_act(const struct backend *be, enum be_act op, const struct tensor *a,
               struct tensor *out, struct err *e);
int be_cpu_act_backward(const struct backend *be, enum be_act op, const struct tensor *x,
                        const struct tensor *y, const struct tensor *gout,
                        struct tensor *gin, double beta, struct err *e);
int be_cpu_softmax(const struct backend *be, const struct tensor *a, struct tensor *out,
                   struct err *e);
int be_cpu_softmax_backward(const struct backend *be, const struct tensor *y,
                            const struct tensor *gout, struct tensor *gin, double beta,
                            struct err *e);
int be_cpu_xent(const struct backend *be, const struct tensor *logits, const struct tensor *labels,
                struct tensor *out, struct err *e);
int be_cpu_xent_backward(const struct backend *be, const struct tensor *logits,
                         const struct tensor *labels, const struct tensor *gout,
                         struct tensor *glogits, double beta, struct err *e);
int be_cpu_bce_logits(const struct backend *be, const struct tensor *x, const struct tensor *y,
                      struct tensor *out, struct err *e);
int be_cpu_bce_logits_backward(const struct backend *be, const struct tensor *x,
                               const struct tensor *y, const struct tensor *gout,
                               struct tensor *gx, double beta, struct err *e);
int be_cpu_linear_mse(const struct backend *be, const struct tensor *x, const struct tensor *w,
                      const struct tensor *b, const struct tensor *y, struct tensor *loss,
                      struct tensor *gw, struct tensor *gb, struct err *e);

int be_cpu_bias_act(const struct backend *be, struct tensor *out, const struct tensor *b,
                    enum be_act op, struct err *e);

/* The memory and stream entries of be_cpu_mem.c, for the table in be_cpu.c. */
void *be_cpu_host_alloc(const struct backend *be, size_t bytes, struct err *e);
void be_cpu_host_free(const struct backend *be, void *p);
int be_cpu_event_new(const struct backend *be, struct be_event **out, struct err *e);
void be_cpu_event_free(const struct backend *be, struct be_event *ev);
/* upload_async and upload_start: a memmove, done on return. */
int be_cpu_upload(const struct backend *be, void *dst, const void *src, size_t bytes,
                  struct be_event *reusable, struct be_event *copied, struct err *e);
/* compute_wait and compute_record: nothing to order. */
int be_cpu_event_op(const struct backend *be, struct be_event *ev, struct err *e);
int be_cpu_event_query(const struct backend *be, struct be_event *ev, bool *done, struct err *e);
int be_cpu_synchronize(const struct backend *be, struct err *e);
int be_cpu_copy_on_device(const struct backend *be, void *dst, const void *src, size_t bytes,
                          struct err *e);
void be_cpu_memory_stats(const struct backend *be, struct be_mem_stats *out);
int be_cpu_free_memory(const struct backend *be, size_t *free_bytes, struct err *e);
void *be_cpu_alloc_spare(const struct backend *be, size_t bytes, struct err *e);
size_t be_cpu_alloc_size(const struct backend *be, size_t bytes);
void be_cpu_set_reclaim(const struct backend *be, bool (*reclaim)(void *ctx), void *ctx);
/* No stream a collective library could queue on (native_stream, side_stream): *stream NULL. */
int be_cpu_native_stream(const struct backend *be, void **stream, struct err *e);

#endif
