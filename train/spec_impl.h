/* spec_impl.h — internal to train/spec*.c: typed field readers that name the field in errors, and "device". */
#ifndef TRAIND_TRAIN_SPEC_IMPL_H
#define TRAIND_TRAIN_SPEC_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "spec.h"

/*
 * Each returns 0, or -1 with se naming the field ("parent.key", or whichever is given)
 * and saying what is wrong. The getters read an optional key of obj: when it is
 * absent, *out keeps its default.
 */
int spec_fail(struct spec_error *se, const char *parent, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "an object", "a string", ...: what a value is, for messages. */
const char *spec_type_name(const json_t *v);
/* A non-empty string of at most SPEC_MAX_STRING bytes without NULs; null counts as absent when nullable. */
int spec_get_string(const json_t *obj, const char *path, const char *key, bool nullable, const char **out,
                    struct spec_error *se);
int spec_get_int(const json_t *obj, const char *path, const char *key, int64_t lo, int64_t hi, int64_t *out,
                 struct spec_error *se);
/* A finite number in [lo, hi], or (lo, hi] when lo_open. Integers count as numbers. */
int spec_get_real(const json_t *obj, const char *path, const char *key, double lo, bool lo_open, double hi,
                  double *out, struct spec_error *se);
int spec_get_bool(const json_t *obj, const char *path, const char *key, bool *out, struct spec_error *se);
struct spec_field;
/* The value of v among a schema row's words, or -1. */
int spec_word_index(const struct spec_field *f, const char *v);
/* Refuses v, not among f's words, naming those it takes. */
int spec_refuse_word(const struct spec_field *f, const char *v, struct spec_error *se);

/* spec_device.c: "device", a name into *device (enum spec_device) and s->device_index, or a list into s->devices. */
int spec_parse_device(const json_t *root, struct job_spec *s, int *device, struct spec_error *se);
/* "cuda:1", or the list as given: ["cuda:1", "cpu"]. */
json_t *spec_device_json(const struct job_spec *s);

#endif
