/* ckpt_sample.c — writes a checkpoint of Sequential(Linear(6,4), Tanh, Linear(4,2)) in float64
 * after rng_seed(3) and the default init to argv[1], for safetensors_ref.py verify-ours. */
#include <stdio.h>

#include "backend.h"
#include "checkpoint.h"

int main(int argc, char **argv)
{
    struct err e = {0};
    struct nn_model *m;
    struct rng r;
    struct nn_layer_spec net[] = {{NN_LAYER_LINEAR, 4}, {NN_LAYER_TANH, 0}, {NN_LAYER_LINEAR, 2}};
    struct ckpt_kv meta[] = {{"job_id", "sample-job"}, {"iteration", "0"}};
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
        return 2;
    }
    rng_seed(&r, 3);
    if (nn_sequential(be_cpu(), TENSOR_F64, 6, net, 3, &m, &e) || nn_init(m, NN_INIT_DEFAULT, &r, &e) ||
        ckpt_save(argv[1], m, NULL, meta, 2, &e)) {
        fprintf(stderr, "ckpt_sample: %s\n", e.msg);
        return 1;
    }
    nn_model_free(m);
    return 0;
}
