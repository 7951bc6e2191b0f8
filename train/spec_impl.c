/* spec_impl.c — reading the typed fields of a job spec, with errors that name the field (spec_impl.h). */
#include "spec_impl.h"
#include "spec_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int spec_fail(struct spec_error *se, const char *parent, const char *key, const char *fmt, ...)
{
    if (parent && *parent && key)
        snprintf(se->field, sizeof se->field, "%s.%s", parent, key);
    else
        snprintf(se->field, sizeof se->field, "%s", key ? key : parent);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(se->message, sizeof se->message, fmt, ap);
    va_end(ap);
    return -1;
}

const char *spec_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Reads an optional string; *out keeps its default when the key is absent. */
int spec_get_string(const json_t *obj, const char *path, const char *key, bool nullable,
                    const char **out, struct spec_error *se)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || (nullable && json_is_null(v)))
        return 0;
    if (!json_is_string(v))
        return spec_fail(se, path, key, "must be a string, not %s", spec_type_name(v));
    if (json_string_length(v) == 0)
        return spec_fail(se, path, key, "must not be empty");
    if (json_string_length(v) > SPEC_MAX_STRING)
        return spec_fail(se, path, key, "is longer than %d bytes", SPEC_MAX_STRING);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return spec_fail(se, path, key, "must not contain NUL characters");
    *out = json_string_value(v);
    return 0;
}

int spec_get_int(const json_t *obj, const char *path, const char *key, int64_t lo, int64_t hi,
                 int64_t *out, struct spec_error *se)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return spec_fail(se, path, key, "must be an integer, not %s", spec_type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return spec_fail(se, path, key, "must be between %lld and %lld, got %lld", (long long)lo,
                         (long long)hi, (long long)x);
    *out = x;
    return 0;
}

/* A finite number in [lo, hi], or (lo, hi] when lo_open. Integers count as numbers. */
int spec_get_real(const json_t *obj, const char *path, const char *key, double lo, bool lo_open,
                  double hi, double *out, struct spec_error *se)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return spec_fail(se, path, key, "must be a number, not %s", spec_type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi)
        return spec_fail(se, path, key, "must be %s %g and at most %g, got %.17g",
                         lo_open ? "greater than" : "at least", lo, hi, x);
    *out = x;
    return 0;
}

int spec_get_bool(const json_t *obj, const char *path, const char *key, bool *out,
                  struct spec_error *se)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return spec_fail(se, path, key, "must be true or false, not %s", spec_type_name(v));
    *out = json_is_true(v);
    return 0;
}

int spec_word_index(const struct spec_field *f, const char *v)
{
    for (int i = 0; v && i < f->n_words; i++)
        if (f->words[i] && strcmp(v, f->words[i]) == 0)
            return i;
    return -1;
}

int spec_refuse_word(const struct spec_field *f, const char *v, struct spec_error *se)
{
    if (f->flags & SPEC_F_FIXED)
        return spec_fail(se, "", f->path, "only \"%s\" is supported yet", f->words[0]);
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (int i = 0; i < f->n_words && len < sizeof list; i++)
        if (f->words[i]) {
            int n = snprintf(list + len, sizeof list - len, "%s\"%s\"", len ? ", " : "", f->words[i]);
            len += n > 0 ? (size_t)n : 0;
        }
    return spec_fail(se, "", f->path, "\"%s\" is not one of the accepted values (%s)", v, list);
}
