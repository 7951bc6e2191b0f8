/* spec.c — parsing a job spec and writing it back, both by walking the schema table (spec_schema.c). */
#include "spec.h"

#include <stdlib.h>
#include <string.h>

#include "spec_impl.h"
#include "spec_schema.h"

static void *member(struct job_spec *s, const struct spec_field *f)
{
    return (char *)s + f->offset;
}

static const void *cmember(const struct job_spec *s, const struct spec_field *f)
{
    return (const char *)s + f->offset;
}

/* INT and ENUM members are int-sized or int64_t. */
static void store_int(struct job_spec *s, const struct spec_field *f, int64_t v)
{
    if (f->size == sizeof(int64_t))
        memcpy(member(s, f), &v, sizeof v);
    else {
        int i = (int)v;
        memcpy(member(s, f), &i, sizeof i);
    }
}

static int64_t load_int(const struct job_spec *s, const struct spec_field *f)
{
    if (f->size == sizeof(int64_t)) {
        int64_t v;
        memcpy(&v, cmember(s, f), sizeof v);
        return v;
    }
    int i;
    memcpy(&i, cmember(s, f), sizeof i);
    return i;
}

/* The JSON object that holds row f's value in root, or NULL when it (or an object above it) is not there. */
static const json_t *holder(const json_t *root, const struct spec_field *f)
{
    const json_t *o = root;
    const char *p = f->path, *dot;
    while (o && (dot = strchr(p, '.'))) {
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(dot - p), p);
        o = json_object_get(o, key);
        o = json_is_object(o) ? o : NULL;
        p = dot + 1;
    }
    return o;
}

/* The parent path of row f ("" at the top level), into buf. */
static const char *parent_of(const struct spec_field *f, char *buf, size_t cap)
{
    const char *dot = strrchr(f->path, '.');
    snprintf(buf, cap, "%.*s", dot ? (int)(dot - f->path) : 0, f->path);
    return buf;
}

static int fail_at(const struct spec_field *f, struct spec_error *se, const char *msg)
{
    return spec_fail(se, "", f->path, "%s", msg);
}

/* Whether the spec's optimizer or model (read before f in the table) takes f. */
static bool takes(const struct spec_field *f, const struct job_spec *s)
{
    if (f->optimizers)
        return f->optimizers & (1u << s->optimizer.kind);
    return !f->models || (f->models & (1u << s->model));
}

static int refuse_field(const struct spec_field *f, const struct job_spec *s, struct spec_error *se)
{
    char who[64];
    spec_field_takers(f, who, sizeof who);
    const struct spec_field *kinds = spec_field_find(f->optimizers ? "optimizer.type" : "model.type");
    int kind = f->optimizers ? (int)s->optimizer.kind : (int)s->model;
    return spec_fail(se, "", f->path, "'%s' is for %s, not \"%s\"", spec_field_key(f), who, kinds->words[kind]);
}

/* scheme://user:password@host/...: credentials would be stored, shown by GET /jobs/{id} and logged. */
static int refuse_userinfo(const struct spec_field *f, const char *url, struct spec_error *se)
{
    const char *p = strstr(url, "://");
    if (!p)
        return 0;
    p += 3;
    if (memchr(p, '@', strcspn(p, "/?#")))
        return fail_at(f, se, "must not carry credentials (user:password@); give them to the daemon as "
                       "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY instead");
    return 0;
}

static int read_string(const struct spec_field *f, const json_t *obj, struct job_spec *s, struct spec_error *se)
{
    char parent[64];
    const char *v = NULL;
    if (spec_get_string(obj, parent_of(f, parent, sizeof parent), spec_field_key(f), false, &v, se) ||
        ((f->flags & SPEC_F_URL) && refuse_userinfo(f, v, se)))
        return -1;
    char **to = member(s, f);
    free(*to);
    if (!(*to = strdup(v)))
        return fail_at(f, se, "out of memory");
    return 0;
}

static int read_enum(const struct spec_field *f, const json_t *obj, struct job_spec *s, struct spec_error *se)
{
    char parent[64];
    const char *v = NULL;
    if (spec_get_string(obj, parent_of(f, parent, sizeof parent), spec_field_key(f), false, &v, se))
        return -1;
    int i = spec_word_index(f, v);
    if (i < 0)
        return spec_refuse_word(f, v, se);
    if (!(f->flags & SPEC_F_FIXED))
        store_int(s, f, i);
    return 0;
}

/* A present, non-null value of a row with a plain JSON type. */
static int read_value(const struct spec_field *f, const json_t *obj, struct job_spec *s, struct spec_error *se)
{
    char parent[64];
    const char *p = parent_of(f, parent, sizeof parent), *key = spec_field_key(f);
    int64_t i = 0;
    switch (f->type) {
    case SPEC_T_STRING: return read_string(f, obj, s, se);
    case SPEC_T_ENUM: return read_enum(f, obj, s, se);
    case SPEC_T_INT:
        if (spec_get_int(obj, p, key, f->ilo, f->ihi, &i, se))
            return -1;
        store_int(s, f, i);
        return 0;
    case SPEC_T_REAL:
        return spec_get_real(obj, p, key, f->rlo, f->flags & SPEC_F_LO_OPEN, f->rhi, member(s, f), se);
    case SPEC_T_BOOL: return spec_get_bool(obj, p, key, member(s, f), se);
    case SPEC_T_OBJECT:
        if (!json_is_object(json_object_get(obj, key)))
            return spec_fail(se, p, key, "must be an object, not %s", spec_type_name(json_object_get(obj, key)));
        return spec_check_known(json_object_get(obj, key), f->path, se);
    case SPEC_T_FORM: break;
    }
    return 0;
}

/* Row f of root into s: s holds the rows before it, and every default. */
static int read_field(const struct spec_field *f, const json_t *root, struct job_spec *s, struct spec_error *se)
{
    const json_t *obj = holder(root, f);
    if (!obj)
        return 0;
    const json_t *v = json_object_get(obj, spec_field_key(f));
    if (!takes(f, s))
        return v ? refuse_field(f, s, se) : 0;
    int rc;
    if (f->type == SPEC_T_FORM)
        rc = f->form->parse(f, obj, v, s, se);
    else if (!v || (json_is_null(v) && (f->flags & (SPEC_F_NULL | SPEC_F_DERIVED))))
        rc = (f->flags & SPEC_F_REQUIRED) && !v ? fail_at(f, se, "is required") : 0;
    else
        rc = read_value(f, obj, s, se);
    return rc || !f->check ? rc : f->check(s, se);
}

/* The defaults of the rows that have one of their own; the others start at zero or NULL. */
static void fill_defaults(struct job_spec *s)
{
    s->optimizer = optim_defaults[OPTIM_SGD];
    for (size_t i = 0; i < spec_n_fields; i++) {
        const struct spec_field *f = &spec_fields[i];
        if (f->optimizers || f->flags & SPEC_F_FIXED)
            continue;
        if (f->type == SPEC_T_INT || f->type == SPEC_T_ENUM)
            store_int(s, f, f->def);
        else if (f->type == SPEC_T_REAL)
            memcpy(member(s, f), &f->rdef, sizeof f->rdef);
        else if (f->type == SPEC_T_BOOL)
            *(bool *)member(s, f) = f->def != 0;
    }
}

int spec_parse(const json_t *root, struct job_spec **out, struct spec_error *se)
{
    memset(se, 0, sizeof *se);
    *out = NULL;
    if (!json_is_object(root))
        return spec_fail(se, "", "", "the job spec must be a JSON object, not %s", spec_type_name(root));
    if (spec_check_known(root, "", se))
        return -1;
    struct job_spec *s = calloc(1, sizeof *s);
    if (!s)
        return spec_fail(se, "", "", "out of memory");
    fill_defaults(s);
    for (size_t i = 0; i < spec_n_fields; i++)
        if (read_field(&spec_fields[i], root, s, se)) {
            spec_free(s);
            return -1;
        }
    *out = s;
    return 0;
}

struct job_spec *spec_dup(const struct job_spec *s, struct spec_error *se)
{
    /* Through the canonical form: spec_parse reads it back to an equal spec, pointers and all. */
    json_t *root = spec_to_json(s);
    struct job_spec *out = NULL;
    if (!root)
        spec_fail(se, "", "", "out of memory");
    else
        spec_parse(root, &out, se);
    json_decref(root);
    return out;
}

void spec_free(struct job_spec *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < spec_n_fields; i++)
        if (spec_fields[i].type == SPEC_T_STRING)
            free(*(char **)member(s, &spec_fields[i]));
    free(s->data.label_name);
    free(s->data.features);
    free(s);
}

/* Row f's canonical JSON; NULL with *omit for a field left out, NULL alone when out of memory. */
static json_t *dump_value(const struct spec_field *f, const struct job_spec *s, bool *omit)
{
    *omit = !takes(f, s);
    if (*omit)
        return NULL;
    bool failed = false;
    switch (f->type) {
    case SPEC_T_OBJECT: return json_object();
    case SPEC_T_FORM: {
        json_t *v = f->form->dump(s, &failed);
        *omit = !v && !failed;
        return v;
    }
    case SPEC_T_STRING: {
        const char *v = *(char *const *)cmember(s, f);
        return v ? json_string(v) : json_null();
    }
    case SPEC_T_ENUM: return json_string(f->words[f->flags & SPEC_F_FIXED ? 0 : load_int(s, f)]);
    case SPEC_T_BOOL: return json_boolean(*(const bool *)cmember(s, f));
    case SPEC_T_INT: {
        int64_t v = load_int(s, f);
        *omit = v == 0 && (f->flags & SPEC_F_DERIVED);
        return *omit ? NULL : v == 0 && (f->flags & SPEC_F_NULL) ? json_null() : json_integer(v);
    }
    case SPEC_T_REAL: {
        double v;
        memcpy(&v, cmember(s, f), sizeof v);
        return v == 0 && (f->flags & SPEC_F_NULL) ? json_null() : json_real(v);
    }
    }
    return NULL;
}

/* The object of row f's parent in the dump, or NULL when the parent writes its fields itself. */
static json_t *dump_holder(json_t *root, const struct spec_field *f)
{
    char parent[64];
    json_t *o = root;
    const char *p = parent_of(f, parent, sizeof parent);
    if (!*p)
        return root;
    const struct spec_field *pf = spec_field_find(p);
    if (!pf || pf->type != SPEC_T_OBJECT)
        return NULL;
    const char *dot;
    while (o && (dot = strchr(p, '.'))) {
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(dot - p), p);
        o = json_object_get(o, key);
        p = dot + 1;
    }
    return o ? json_object_get(o, p) : NULL;
}

json_t *spec_to_json(const struct job_spec *s)
{
    json_t *root = json_object();
    for (size_t i = 0; root && i < spec_n_fields; i++) {
        const struct spec_field *f = &spec_fields[i];
        json_t *o = dump_holder(root, f);
        if (!o)
            continue;
        bool omit;
        json_t *v = dump_value(f, s, &omit);
        if (omit)
            continue;
        if (!v || json_object_set_new(o, spec_field_key(f), v)) {
            json_decref(root);
            return NULL;
        }
    }
    return root;
}
