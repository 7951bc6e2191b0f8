/* spec.h — the job spec (DESIGN.md §3): parsed from JSON, validated, defaults filled. */
#ifndef TRAIND_DAEMON_SPEC_H
#define TRAIND_DAEMON_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

enum spec_header { SPEC_HEADER_AUTO, SPEC_HEADER_YES, SPEC_HEADER_NO };
enum spec_dtype { SPEC_FLOAT32, SPEC_FLOAT64 };
enum spec_model { SPEC_MODEL_LINEAR };
enum spec_loss { SPEC_LOSS_MSE };
enum spec_optim { SPEC_OPTIM_SGD, SPEC_OPTIM_ADAM, SPEC_OPTIM_ADAMW };
enum spec_device { SPEC_DEVICE_AUTO, SPEC_DEVICE_CPU };

#define SPEC_MAX_BATCH_SIZE (INT64_C(1) << 26)
#define SPEC_MAX_ITERATIONS INT64_C(1000000000)
#define SPEC_MAX_STRING 4096
#define SPEC_MAX_SHUFFLE_BUFFER (INT64_C(1) << 26)

/* Immutable once parsed: the loop thread and a worker may read it at the same time. */
struct job_spec {
    char *name;                 /* NULL when not given */
    char *client_id;            /* NULL when not given */
    int priority;               /* higher runs first among queued jobs */
    struct {
        char *train;            /* URL or path, glob on the last component */
        char *shards;           /* kaen's .meta/shards listing (id,count), or NULL */
        enum spec_header header;
        int label;              /* column index of the label */
        bool drop_last;
        bool shuffle_partitions;  /* a seeded permutation of the partitions each epoch */
        int64_t shuffle_buffer;   /* rows drawn at random from a buffer this large; 0 = off */
        char *endpoint;         /* S3-compatible endpoint, or NULL (AWS_ENDPOINT_URL, then AWS) */
        char *region;           /* NULL: AWS_DEFAULT_REGION, then us-east-1 */
        bool anonymous;         /* unsigned S3 requests, for public buckets */
    } data;
    enum spec_model model;
    enum spec_loss loss;
    struct {
        enum spec_optim type;
        double lr, weight_decay;
        double momentum;        /* sgd */
        bool nesterov;          /* sgd, with momentum > 0 */
        double beta1, beta2;    /* adam, adamw */
        double eps;             /* adam, adamw */
    } optimizer;
    double clip_grad_norm;      /* 0: no clipping (JSON null) */
    int64_t batch_size;
    int64_t iterations;
    enum spec_dtype dtype;
    enum spec_device device;
    uint64_t seed;
    int64_t checkpoint_every;   /* iterations between checkpoints; 0: only when stopping and at the end */
};

/* Why a spec was refused: the dotted path of the offending field and a sentence. */
struct spec_error {
    char field[128];
    char message[256];
};

/*
 * Validates root and fills the defaults of §3. Unknown fields are refused, and
 * fields the design has but this build does not implement yet are refused unless
 * they hold their "off" value (null, false or 0). Returns 0 and *out, or -1 with se.
 */
int spec_parse(const json_t *root, struct job_spec **out, struct spec_error *se);
void spec_free(struct job_spec *s);

/* The spec as JSON with every default written out (what GET /jobs/{id} shows). */
json_t *spec_to_json(const struct job_spec *s);

#endif
