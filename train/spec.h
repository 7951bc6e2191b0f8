/* spec.h — the job spec: parsed from JSON, validated, defaults filled, by one schema table (spec_schema.c). */
#ifndef TRAIND_TRAIN_SPEC_H
#define TRAIND_TRAIN_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "dataset.h"
#include "nn.h"
#include "optim.h"

/*
 * Where core has the concept, the spec holds core's enum (enum tensor_dtype, enum
 * nn_loss_kind, enum nn_layer_kind, enum nn_init_kind, struct optim_config); the spec's
 * JSON words for them are in the schema table (spec_schema.c).
 */
enum spec_header { SPEC_HEADER_AUTO, SPEC_HEADER_YES, SPEC_HEADER_NO };
enum spec_format { SPEC_FORMAT_AUTO, SPEC_FORMAT_CSV, SPEC_FORMAT_PARQUET };
enum spec_model { SPEC_MODEL_LINEAR, SPEC_MODEL_MLP, SPEC_MODEL_LAYERS };
/* SPEC_DEVICE_LIST: "device": ["cuda:1", "cpu"], any of them (job_spec.devices). */
enum spec_device { SPEC_DEVICE_AUTO, SPEC_DEVICE_CPU, SPEC_DEVICE_CUDA, SPEC_DEVICE_LIST };

/* "cuda:N" takes N in 0 .. SPEC_MAX_CUDA_INDEX. */
#define SPEC_MAX_CUDA_INDEX 63
/* A device list names each device once: every GPU and the CPU at most. */
#define SPEC_MAX_DEVICES (SPEC_MAX_CUDA_INDEX + 2)

/* One element of a device list: SPEC_DEVICE_CPU, or SPEC_DEVICE_CUDA with its index. */
struct spec_device_ref {
    enum spec_device kind;
    int index;
};

/* "priority": higher runs first among queued jobs. */
#define SPEC_PRIORITY_MIN (-1000)
#define SPEC_PRIORITY_MAX 1000
#define SPEC_MAX_BATCH_SIZE (INT64_C(1) << 26)
#define SPEC_MAX_ITERATIONS INT64_C(1000000000)
#define SPEC_MAX_EPOCHS INT64_C(1000000)
#define SPEC_MAX_STRING 4096
#define SPEC_MAX_LAYERS NN_MAX_LAYERS
#define SPEC_MAX_WIDTH 65536
#define SPEC_MAX_SHUFFLE_BUFFER (INT64_C(1) << 26)
#define SPEC_MAX_REPLICAS 64
#define SPEC_MAX_COLUMN 65535      /* a column index */
#define SPEC_MAX_COLUMN_NAME 256   /* bytes of a column name */
#define SPEC_MAX_FEATURES 4096     /* columns in data.features */

/* Immutable once parsed: the loop thread and a worker may read it at the same time. */
struct job_spec {
    char *name;                 /* NULL when not given */
    char *client_id;            /* NULL when not given */
    int priority;               /* higher runs first among queued jobs */
    struct {
        char *train;            /* URL or path, glob on the last component */
        char *test;             /* the whole of it evaluated on every eval_every iterations and at the end; or NULL */
        char *shards;           /* kaen's .meta/shards listing (id,count), or NULL */
        enum spec_format format;  /* auto: by the partitions' names */
        enum spec_header header;
        int label;              /* column index of the label, when label_name is NULL */
        char *label_name;       /* the label's column name, or NULL */
        struct dataset_column *features; /* listed features, their names in the same block; NULL: "rest" */
        size_t n_features;
        bool drop_last;
        bool shuffle_partitions;  /* a seeded permutation of the partitions each epoch */
        int64_t shuffle_buffer;   /* rows drawn at random from a buffer this large; 0 = off */
        char *endpoint;         /* S3-compatible endpoint, or NULL (AWS_ENDPOINT_URL, then AWS) */
        char *region;           /* NULL: AWS_DEFAULT_REGION, then us-east-1 */
        bool anonymous;         /* unsigned S3 requests, for public buckets */
    } data;
    enum spec_model model;
    struct {
        int n_hidden;           /* mlp: Linear(hidden[i]) + activation each, then Linear(outputs) */
        int64_t hidden[SPEC_MAX_LAYERS];
        enum nn_layer_kind activation;
        int64_t outputs;        /* mlp: 0 = from the loss and data (1, or the classes seen) */
        int n_layers;           /* layers: nn.Sequential as given */
        struct nn_layer_spec layers[SPEC_MAX_LAYERS];
    } net;
    enum nn_loss_kind loss;
    struct optim_config optimizer;  /* only the fields of its kind are read or written */
    double clip_grad_norm;      /* 0: no clipping (JSON null) */
    int64_t batch_size;
    int64_t iterations;         /* exactly one of iterations and epochs is set; the other is 0 */
    int64_t epochs;             /* train until the data cursor has done this many epochs */
    enum tensor_dtype dtype;
    enum spec_device device;
    int device_index;           /* N of "cuda:N" (SPEC_DEVICE_CUDA); 0 otherwise */
    int n_devices;              /* SPEC_DEVICE_LIST: devices[0 .. n_devices), as given; 0 otherwise */
    struct spec_device_ref devices[SPEC_MAX_DEVICES];
    int replicas;               /* data-parallel copies, each on its own device; 1: none */
    double replica_bucket_mb;   /* replicas: the gradient all-reduced in buckets of this many MiB; 0: whole */
    uint64_t seed;
    enum nn_init_kind init;     /* default: kaiming_uniform for linear, PyTorch's nn.Linear init otherwise */
    char *init_from;            /* init {"from": ...}: a job id or a .safetensors URL or path; NULL: init */
    int64_t checkpoint_every;   /* iterations between checkpoints; 0: only when stopping and at the end */
    int64_t eval_every;         /* iterations between evaluations on data.test; 0: only at the end */
};

/* Why a spec was refused: the dotted path of the offending field and a sentence. */
struct spec_error {
    char field[128];
    char message[256];
};

/*
 * Validates root and fills the defaults docs/spec.md lists. Unknown fields are refused,
 * and planned fields this build does not implement yet are refused unless
 * they hold their "off" value (null, false or 0). Returns 0 and *out, or -1 with se.
 */
int spec_parse(const json_t *root, struct job_spec **out, struct spec_error *se);
void spec_free(struct job_spec *s);

/* A copy of s that another thread may own after s is freed; NULL with se filled on failure. */
struct job_spec *spec_dup(const struct job_spec *s, struct spec_error *se);

/* Whether init_from names a job of this daemon (16 hex digits) rather than a URL or path. */
bool spec_init_from_job(const struct job_spec *s);

/*
 * The device as the spec writes it: "auto", "cpu" or "cuda:N" (cap 16 is enough), or a
 * list as "cuda:1,cpu" (cut short at cap).
 */
void spec_device_name(const struct job_spec *s, char *buf, size_t cap);

/*
 * The spec in its canonical form, as stored and as GET /jobs/{id} shows it: every default
 * written out, values derived from the data (an MLP's outputs) left out, null only where
 * it means "none"; spec_parse reads it back to an equal spec.
 */
json_t *spec_to_json(const struct job_spec *s);

/* The job spec's fields as a Markdown table (docs/spec.md, `traind spec-fields`); malloc'd, NULL without memory. */
char *spec_fields_markdown(void);

/*
 * The job spec as a JSON Schema (draft 2020-12, as OpenAPI 3.1 takes it), written from the same
 * table: types, words, bounds, defaults, required fields, and which model or optimizer takes a
 * field. docs/openapi.yaml's JobSpec is this text (`traind spec-schema`); malloc'd. NULL without
 * memory, or with *missing the path of a field whose form has no schema yet.
 */
char *spec_json_schema_text(const char **missing);

#endif
