/* spec_schema.h — internal to train/spec*.c: the job spec's schema table, one row a field. */
#ifndef TRAIND_TRAIN_SPEC_SCHEMA_H
#define TRAIND_TRAIN_SPEC_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "spec.h"

enum spec_type {
    SPEC_T_OBJECT,   /* holds the rows whose path continues it */
    SPEC_T_STRING,   /* char * at offset, malloc'd */
    SPEC_T_INT,      /* int or int64_t at offset (size says which), in [ilo, ihi] */
    SPEC_T_REAL,     /* double at offset, finite, in [rlo, rhi] or (rlo, rhi] */
    SPEC_T_BOOL,     /* bool at offset */
    SPEC_T_ENUM,     /* an int-sized enum at offset: words[v] is the JSON string of value v */
    SPEC_T_FORM,     /* more than one JSON shape: read and written by form's handlers */
};

enum {
    SPEC_F_REQUIRED = 1 << 0,  /* absent is an error */
    SPEC_F_NULL = 1 << 1,      /* null means none: NULL, 0 or false, and is written as null */
    SPEC_F_DERIVED = 1 << 2,   /* absent (or null) means derived from the data: 0, and left out when 0 */
    SPEC_F_LO_OPEN = 1 << 3,   /* SPEC_T_REAL: rlo itself is refused */
    SPEC_F_URL = 1 << 4,       /* SPEC_T_STRING: user:password@ in a URL is refused */
    SPEC_F_FIXED = 1 << 5,     /* stored nowhere: only words[0] is accepted yet */
};

struct spec_field;

/*
 * A field with more than one JSON shape. parse is called whenever the object holding the
 * field is there (obj), with v its value or NULL when absent, and reads it into s; dump
 * gives the JSON of s's value, or NULL for a field to leave out (setting *failed when out
 * of memory).
 */
struct spec_form {
    int (*parse)(const struct spec_field *f, const json_t *obj, const json_t *v, struct job_spec *s,
                 struct spec_error *se);
    json_t *(*dump)(const struct job_spec *s, bool *failed);
};

/* Checks a field against the fields before it in the table, right after it is read. */
typedef int (*spec_check_fn)(const struct job_spec *s, struct spec_error *se);

struct spec_field {
    const char *path;          /* "optimizer.lr"; an object's row comes before its fields' rows */
    enum spec_type type;
    unsigned flags;            /* SPEC_F_* */
    size_t offset, size;       /* the member of struct job_spec (not for OBJECT and FORM) */
    int64_t ilo, ihi;          /* SPEC_T_INT bounds */
    double rlo, rhi;           /* SPEC_T_REAL bounds */
    int64_t def;               /* the default of INT, BOOL and ENUM */
    double rdef;               /* the default of REAL */
    const char *const *words;  /* SPEC_T_ENUM (and a FORM's words): n_words entries, NULL for a value
                                  the spec does not take */
    int n_words;
    unsigned optimizers;       /* bits (1 << enum optim_kind) of the optimizers taking it; 0: not an optimizer
                                  field. Its default is optim_defaults' */
    unsigned models;           /* bits (1 << enum spec_model) of the models taking it; 0: any */
    const struct spec_form *form;
    spec_check_fn check;
    const char *shows;         /* docs: the default, where the row's own is not it (FORM, derived) */
    const char *accepts;       /* docs: what the field takes, where the type does not say it */
    const char *help;          /* docs: one line on what it means */
};

extern const struct spec_field spec_fields[];
extern const size_t spec_n_fields;

/* The row of path, or NULL. */
const struct spec_field *spec_field_find(const char *path);
/* The row's last path component: "lr" of "optimizer.lr". */
const char *spec_field_key(const struct spec_field *f);
/* Whether f is a field of the object row parent ("" for the top level). */
bool spec_field_is_child(const struct spec_field *f, const char *parent);
/* Who takes a field that only some optimizers or models take: "sgd", "adam and adamw", "mlp". */
void spec_field_takers(const struct spec_field *f, char *buf, size_t cap);
/* Refuses a key of obj (the JSON of object row path) that the table has no row for. */
int spec_check_known(const json_t *obj, const char *path, struct spec_error *se);

/* spec_forms.c: the handlers of the fields with more than one JSON shape. */
extern const struct spec_form spec_form_model_type, spec_form_hidden, spec_form_layers, spec_form_header,
    spec_form_label, spec_form_features,
    spec_form_betas, spec_form_device, spec_form_init, spec_form_optimizer_type;
int spec_check_loss(const struct job_spec *s, struct spec_error *se);
int spec_check_nesterov(const struct job_spec *s, struct spec_error *se);
int spec_check_length(const struct job_spec *s, struct spec_error *se);
int spec_check_eval_every(const struct job_spec *s, struct spec_error *se);
int spec_check_init_from(const struct job_spec *s, struct spec_error *se);
int spec_check_replicas(const struct job_spec *s, struct spec_error *se);

#endif
