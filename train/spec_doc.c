/* spec_doc.c — the job spec's field list as Markdown, written from the schema table (docs/spec.md). */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_schema.h"

/* The shortest decimal that reads back as v: 0.03, not 0.029999999999999999. */
static void put_real(FILE *b, double v)
{
    char text[32];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(text, sizeof text, "%.*g", prec, v);
        if (strtod(text, NULL) == v)
            break;
    }
    fprintf(b, "%s", text);
}

/* An optimizer field's default for each optimizer, from optim_defaults: "`0.03` (sgd), `0.001` (adam, adamw)". */
static void put_optimizer_default(FILE *b, const struct spec_field *f)
{
    const struct spec_field *types = spec_field_find("optimizer.type");
    size_t at = f->offset - offsetof(struct job_spec, optimizer);
    bool done[OPTIM_NUM_KINDS] = {false};
    bool first = true;
    for (int k = 0; k < OPTIM_NUM_KINDS; k++) {
        if (done[k] || !(f->optimizers & (1u << k)))
            continue;
        const char *v = (const char *)&optim_defaults[k] + at;
        fprintf(b, "%s`", first ? "" : ", ");
        if (f->type == SPEC_T_BOOL)
            fprintf(b, "%s", *(const bool *)v ? "true" : "false");
        else
            put_real(b, *(const double *)v);
        fprintf(b, "` (");
        for (int j = k; j < OPTIM_NUM_KINDS; j++)
            if ((f->optimizers & (1u << j)) && memcmp((const char *)&optim_defaults[j] + at, v, f->size) == 0) {
                fprintf(b, "%s%s", j == k ? "" : ", ", types->words[j]);
                done[j] = true;
            }
        fprintf(b, ")");
        first = false;
    }
}

static void put_default(FILE *b, const struct spec_field *f)
{
    if (f->shows)
        fprintf(b, "%s", f->shows);
    else if (f->optimizers)
        put_optimizer_default(b, f);
    else if (f->flags & SPEC_F_REQUIRED)
        fprintf(b, "—");
    else if (f->flags & SPEC_F_NULL)
        fprintf(b, "`null`");
    else if (f->type == SPEC_T_OBJECT)
        fprintf(b, "`{}`");
    else if (f->type == SPEC_T_ENUM)
        fprintf(b, "`\"%s\"`", f->words[f->flags & SPEC_F_FIXED ? 0 : f->def]);
    else if (f->type == SPEC_T_BOOL)
        fprintf(b, "`%s`", f->def ? "true" : "false");
    else if (f->type == SPEC_T_INT)
        fprintf(b, "`%lld`", (long long)f->def);
    else if (f->type == SPEC_T_REAL) {
        fprintf(b, "`");
        put_real(b, f->rdef);
        fprintf(b, "`");
    }
}

static void put_words(FILE *b, const struct spec_field *f)
{
    bool first = true;
    for (int i = 0; i < f->n_words; i++)
        if (f->words[i]) {
            fprintf(b, "%s`\"%s\"`", first ? "" : ", ", f->words[i]);
            first = false;
        }
}

static void put_accepts(FILE *b, const struct spec_field *f)
{
    if (f->accepts)
        fprintf(b, "%s", f->accepts);
    else if (f->words)
        put_words(b, f);
    else if (f->type == SPEC_T_OBJECT)
        fprintf(b, "object");
    else if (f->type == SPEC_T_STRING)
        fprintf(b, "string");
    else if (f->type == SPEC_T_BOOL)
        fprintf(b, "`true`, `false`");
    else if (f->type == SPEC_T_INT && f->ihi == INT64_MAX)
        fprintf(b, "integer ≥ %lld", (long long)f->ilo);
    else if (f->type == SPEC_T_INT)
        fprintf(b, "integer %lld..%lld", (long long)f->ilo, (long long)f->ihi);
    else if (f->type == SPEC_T_REAL) {
        fprintf(b, "number %s ", f->flags & SPEC_F_LO_OPEN ? ">" : "≥");
        put_real(b, f->rlo);
        fprintf(b, ", ≤ ");
        put_real(b, f->rhi);
    }
    if (f->flags & SPEC_F_NULL)
        fprintf(b, " or `null`");
    if ((f->optimizers && f->optimizers != (1u << OPTIM_NUM_KINDS) - 1) || f->models) {
        char who[64];
        spec_field_takers(f, who, sizeof who);
        fprintf(b, "; %s only", who);
    }
}

char *spec_fields_markdown(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *b = open_memstream(&text, &len);
    if (!b)
        return NULL;
    fprintf(b, "| field | default | accepted | meaning |\n|---|---|---|---|\n");
    for (size_t i = 0; i < spec_n_fields; i++) {
        const struct spec_field *f = &spec_fields[i];
        fprintf(b, "| `%s` | ", f->path);
        put_default(b, f);
        fprintf(b, " | ");
        put_accepts(b, f);
        fprintf(b, " | %s |\n", f->help);
    }
    bool failed = ferror(b) != 0;
    if (fclose(b) || failed) {
        free(text);
        return NULL;
    }
    return text;
}
