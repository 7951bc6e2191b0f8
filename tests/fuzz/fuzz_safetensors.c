/*
 * fuzz_safetensors.c — a .safetensors file through core's reader (core/checkpoint_read.c), as
 * an init.from download (ckpt_load_params_mem, into a float64 Sequential(Linear(6,4), Tanh,
 * Linear(4,2)) with float32 <-> float64 conversion, and into a float32 linear model of 8
 * features) and as a resume (ckpt_load with Adam's state, ckpt_meta_read, from a file).
 * Invariants: a refused file leaves the model (and optimizer) unchanged; metadata holds at
 * most one pair per 6 bytes of header (`"":""` and a comma).
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "checkpoint.h"
#include "fuzz.h"
#include "nn.h"
#include "optim.h"

struct models {
    struct nn_model *seq, *lin;
    struct optim *adam;
};

static struct models *models(void)
{
    static struct models ms;   /* built once: the reader never keeps a pointer into them */
    if (ms.seq)
        return &ms;
    struct nn_layer_spec layers[] = {{NN_LAYER_LINEAR, 4}, {NN_LAYER_TANH, 0}, {NN_LAYER_LINEAR, 2}};
    struct optim_config cfg;
    optim_config_defaults(&cfg, OPTIM_ADAM);
    struct err e = {0};
    FUZZ_CHECK(nn_sequential(be_cpu(), TENSOR_F64, 6, layers, 3, &ms.seq, &e) == 0 &&
                   nn_linear_regression(be_cpu(), TENSOR_F32, 8, &ms.lin, &e) == 0 &&
                   optim_create(&cfg, ms.seq, &ms.adam, &e) == 0,
               "%s", e.msg);
    return &ms;
}

/* The parameters as float64, to compare before and after a load. */
static double *params(struct nn_model *m, size_t *n)
{
    struct tensor *flat = nn_params_flat(m);
    *n = (size_t)tensor_numel(flat);
    double *v = malloc(*n * sizeof *v);
    struct err e = {0};
    FUZZ_CHECK(tensor_copy_to_host_f64(flat, v, &e) == 0, "%s", e.msg);
    return v;
}

static void load_mem(const uint8_t *data, size_t size, struct nn_model *m)
{
    size_t n;
    double *before = params(m, &n);
    struct err e = {0};
    int rc = ckpt_load_params_mem(data, size, "fuzz.safetensors", m, &e);
    double *after = params(m, &n);
    if (rc != 0)
        FUZZ_CHECK(memcmp(before, after, n * sizeof *before) == 0, "a refused file changed the model: %s",
                   e.msg);
    free(before);
    free(after);
}

/* The bytes as a file the reader opens by name. */
static int as_file(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create");
    FUZZ_CHECK(size == 0 || write(fd, data, size) == (ssize_t)size, "write");
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct models *ms = models();
    load_mem(data, size, ms->seq);
    load_mem(data, size, ms->lin);

    char path[64];
    int fd = as_file(data, size, path, sizeof path);
    struct ckpt_meta *md = NULL;
    struct err e = {0};
    if (ckpt_meta_read(path, &md, &e) == 0)
        FUZZ_CHECK((size_t)ckpt_meta_count(md) * 6 <= size, "%d metadata pairs in %zu bytes",
                   ckpt_meta_count(md), size);
    ckpt_meta_free(md);

    size_t n;
    double *before = params(ms->seq, &n);
    int64_t steps = optim_steps(ms->adam);
    md = NULL;
    int rc = ckpt_load(path, ms->seq, ms->adam, &md, &e);
    double *after = params(ms->seq, &n);
    if (rc != 0) {
        FUZZ_CHECK(md == NULL, "metadata of a refused file");
        FUZZ_CHECK(memcmp(before, after, n * sizeof *before) == 0 && optim_steps(ms->adam) == steps,
                   "a refused file changed the model or its optimizer: %s", e.msg);
    }
    ckpt_meta_free(md);
    free(before);
    free(after);
    close(fd);
    return 0;
}
