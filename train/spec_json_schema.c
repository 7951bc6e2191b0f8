/* spec_json_schema.c — the job spec as a JSON Schema, written from the schema table (docs/openapi.yaml's JobSpec). */
#include "spec.h"

#include <stdlib.h>
#include <string.h>

#include "spec_schema.h"

static json_t *object_schema(const char *path, bool nullable);

/* The kind row a model or optimizer field depends on, and the mask of kinds taking it. */
static const struct spec_field *kind_row(const struct spec_field *f, unsigned *mask)
{
    *mask = f->optimizers ? f->optimizers : f->models;
    return *mask ? spec_field_find(f->optimizers ? "optimizer.type" : "model.type") : NULL;
}

/* {"properties": {"type": {"enum": [the kinds taking f]}}}: what a field of some kinds needs. */
static json_t *kinds_taking(const struct spec_field *kinds, unsigned mask)
{
    json_t *words = json_array();
    for (int i = 0; words && i < kinds->n_words; i++)
        if (mask & (1u << i))
            json_array_append_new(words, json_string(kinds->words[i]));
    return json_pack("{s:{s:{s:o*}}}", "properties", spec_field_key(kinds), "enum", words);
}

/*
 * The default a row writes when left out, or NULL for none (required, derived from the data, or
 * one that depends on other fields: then the row's form or help says what it is). An optimizer
 * field has one only when every optimizer taking it has the same.
 */
static json_t *default_of(const struct spec_field *f)
{
    if (f->flags & (SPEC_F_REQUIRED | SPEC_F_DERIVED) || f->type == SPEC_T_FORM)
        return NULL;
    if (f->flags & SPEC_F_NULL)
        return json_null();
    if (f->optimizers) {
        size_t at = f->offset - offsetof(struct job_spec, optimizer);
        const char *first = NULL;
        for (int k = 0; k < OPTIM_NUM_KINDS; k++) {
            const char *v = (const char *)&optim_defaults[k] + at;
            if (!(f->optimizers & (1u << k)))
                continue;
            if (first && memcmp(first, v, f->size) != 0)
                return NULL;
            first = first ? first : v;
        }
        return f->type == SPEC_T_BOOL ? json_boolean(*(const bool *)first) : json_real(*(const double *)first);
    }
    switch (f->type) {
    case SPEC_T_OBJECT: return json_object();
    case SPEC_T_ENUM: return json_string(f->words[f->flags & SPEC_F_FIXED ? 0 : f->def]);
    case SPEC_T_BOOL: return json_boolean(f->def);
    case SPEC_T_INT: return json_integer(f->def);
    case SPEC_T_REAL: return json_real(f->rdef);
    default: return NULL;
    }
}

/* Row f's schema by its type; nullable rows take null too. */
static json_t *type_schema(const struct spec_field *f)
{
    const char *type = NULL;
    json_t *o = NULL;
    switch (f->type) {
    case SPEC_T_OBJECT: return object_schema(f->path, f->flags & SPEC_F_NULL);
    case SPEC_T_FORM: {
        bool has_rows = false;
        for (size_t i = 0; i < spec_n_fields && !has_rows; i++)
            has_rows = spec_field_is_child(&spec_fields[i], f->path);
        return f->form->schema(f, has_rows ? object_schema(f->path, false) : NULL);
    }
    case SPEC_T_STRING: type = "string"; o = json_pack("{s:i}", "maxLength", SPEC_MAX_STRING); break;
    case SPEC_T_BOOL: type = "boolean"; o = json_object(); break;
    case SPEC_T_INT:
        type = "integer";
        o = json_pack("{s:I}", "minimum", (json_int_t)f->ilo);
        if (o && f->ihi != INT64_MAX)
            json_object_set_new(o, "maximum", json_integer(f->ihi));
        break;
    case SPEC_T_REAL:
        type = "number";
        o = json_pack("{s:f, s:f}", f->flags & SPEC_F_LO_OPEN ? "exclusiveMinimum" : "minimum", f->rlo, "maximum",
                      f->rhi);
        break;
    case SPEC_T_ENUM: {
        json_t *words = json_array();
        for (int i = 0; words && i < (f->flags & SPEC_F_FIXED ? 1 : f->n_words); i++)
            if (f->words[i])
                json_array_append_new(words, json_string(f->words[i]));
        if (words && (f->flags & SPEC_F_NULL))
            json_array_append_new(words, json_null());
        return json_pack("{s:o*}", "enum", words);
    }
    }
    if (!o)
        return NULL;
    json_t *t = json_pack("{s:o*}", "type", f->flags & SPEC_F_NULL ? json_pack("[s, s]", type, "null")
                                                                   : json_string(type));
    if (t)
        json_object_update(t, o);
    json_decref(o);
    return t;
}

static json_t *field_schema(const struct spec_field *f)
{
    json_t *o = type_schema(f);
    if (!o)
        return NULL;
    json_t *dflt = default_of(f);
    if (dflt)
        json_object_set_new(o, "default", dflt);
    json_object_set_new(o, "description", json_string(f->help));
    return o;
}

/*
 * A field that only some models or optimizers take names them in dependentSchemas; its kind
 * row may be left out where its default is among them ("sgd" and "linear", words[0]), or where
 * the field names its kind (model "layers"). A required one is required of those kinds only.
 */
static int add_kind_rules(json_t *o, const struct spec_field *f)
{
    unsigned mask;
    const struct spec_field *kinds = kind_row(f, &mask);
    if (!kinds)
        return 0;
    unsigned every = 0;
    for (int i = 0; i < kinds->n_words; i++)
        every |= kinds->words[i] ? 1u << i : 0;
    if ((mask & every) == every)
        return 0;
    const char *key = spec_field_key(f);
    bool implied = (mask & 1u) || (mask == (1u << SPEC_MODEL_LAYERS) && f->models &&
                                   strcmp(key, kinds->words[SPEC_MODEL_LAYERS]) == 0);
    json_t *need = kinds_taking(kinds, mask);
    if (need && !implied)
        json_object_set_new(need, "required", json_pack("[s]", spec_field_key(kinds)));
    json_t *deps = json_object_get(o, "dependentSchemas");
    if (!deps) {
        deps = json_object();
        json_object_set_new(o, "dependentSchemas", deps);
    }
    if (!need || json_object_set_new(deps, key, need))
        return -1;
    if (!(f->flags & SPEC_F_REQUIRED))
        return 0;
    json_t *all = json_object_get(o, "allOf");
    if (!all) {
        all = json_array();
        json_object_set_new(o, "allOf", all);
    }
    json_t *when = kinds_taking(kinds, mask);
    if (when)
        json_object_set_new(when, "required", json_pack("[s]", spec_field_key(kinds)));
    return json_array_append_new(all, json_pack("{s:o*, s:{s:[s], s:{s:{}}}}", "if", when, "then", "required", key,
                                                "properties", key));
}

/* The object row path ("" for the spec itself): its rows as properties, unknown keys refused. */
static json_t *object_schema(const char *path, bool nullable)
{
    json_t *props = json_object(), *required = json_array();
    json_t *o = json_pack("{s:o, s:o*, s:o*, s:b}", "type",
                          nullable ? json_pack("[s, s]", "object", "null") : json_string("object"), "properties",
                          props, "required", required, "additionalProperties", 0);
    if (!o)
        return NULL;
    for (size_t i = 0; i < spec_n_fields; i++) {
        const struct spec_field *f = &spec_fields[i];
        if (!spec_field_is_child(f, path))
            continue;
        json_t *fs = field_schema(f);
        unsigned mask;
        if (!fs || json_object_set_new(props, spec_field_key(f), fs) || add_kind_rules(o, f)) {
            json_decref(o);
            return NULL;
        }
        if ((f->flags & SPEC_F_REQUIRED) && !kind_row(f, &mask))
            json_array_append_new(required, json_string(spec_field_key(f)));
    }
    if (json_array_size(required) == 0)
        json_object_del(o, "required");
    return o;
}

char *spec_json_schema_text(const char **missing)
{
    *missing = NULL;
    for (size_t i = 0; i < spec_n_fields; i++)
        if (spec_fields[i].type == SPEC_T_FORM && !spec_fields[i].form->schema) {
            *missing = spec_fields[i].path;
            return NULL;
        }
    json_t *o = object_schema("", false);
    if (!o)
        return NULL;
    json_object_set_new(o, "description",
                        json_string("A job spec (the body of POST /jobs). Give `iterations` or `epochs`, exactly one. "
                                    "Written by `traind spec-schema` from the table the daemon parses with."));
    /* 15 digits: the table's bounds and defaults are short decimals, and read back as written. */
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(o);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *out = realloc(text, n + 2);
    if (!out) {
        free(text);
        return NULL;
    }
    memcpy(out + n, "\n", 2);
    return out;
}
