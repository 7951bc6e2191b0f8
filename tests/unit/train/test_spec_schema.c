/* test_spec_schema.c — docs/openapi.yaml's JobSpec is what `traind spec-schema` prints from the schema table. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"
#include "tmpdir.h"

#define BEGIN "# spec-schema begin"
#define END "    # spec-schema end"

/* "    JobSpec:" and the schema indented under it, as scripts/openapi-gen writes them. */
static char *schema_text(void)
{
    const char *missing = NULL;
    char *text = spec_json_schema_text(&missing);
    cr_assert_null(missing, "the spec's field %s has no JSON Schema: give its form in train/spec_forms.c a "
                   "schema", missing);
    cr_assert_not_null(text);
    return text;
}

static char *expected_block(void)
{
    char *schema = schema_text();
    char *out = NULL;
    size_t len = 0;
    FILE *b = open_memstream(&out, &len);
    cr_assert_not_null(b);
    fputs("    JobSpec:\n", b);
    for (char *line = schema, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        fprintf(b, "      %.*s\n", (int)(nl - line), line);
    }
    fclose(b);
    free(schema);
    return out;
}

Test(spec_schema, openapi_yaml_jobspec_is_the_schema_tables)
{
    const char *path = getenv("TRAIND_OPENAPI");
    cr_assert_not_null(path, "TRAIND_OPENAPI (docs/openapi.yaml) is set by meson");
    char *doc = tmp_slurp(path);
    cr_assert_not_null(doc, "cannot read %s", path);
    char *begin = strstr(doc, BEGIN), *end = begin ? strstr(begin, END) : NULL;
    cr_assert(begin && end, "%s has no '" BEGIN "' ... '# spec-schema end' section", path);
    begin = strchr(begin, '\n') + 1;
    *end = '\0';
    char *want = expected_block();
    cr_expect_str_eq(begin, want, "docs/openapi.yaml's JobSpec differs from the schema table's: run "
                     "scripts/openapi-gen build/traind");
    free(want);
    free(doc);
}

/* The bounds and defaults survive the trip through text: 15 digits are enough for the table's. */
Test(spec_schema, bounds_and_defaults_read_back_as_the_table_has_them)
{
    char *text = schema_text();
    json_error_t jerr;
    json_t *s = json_loads(text, 0, &jerr);
    cr_assert_not_null(s, "not JSON: %s", jerr.text);
    json_t *props = json_object_get(s, "properties");
    json_t *lr = json_object_get(json_object_get(json_object_get(props, "optimizer"), "properties"), "lr");
    cr_expect_eq(json_real_value(json_object_get(lr, "exclusiveMinimum")), 0.0);
    cr_expect_eq(json_real_value(json_object_get(lr, "maximum")), 1e6);
    json_t *eps = json_object_get(json_object_get(json_object_get(props, "optimizer"), "properties"), "eps");
    cr_expect_eq(json_real_value(json_object_get(eps, "default")), 1e-8);
    json_t *mom = json_object_get(json_object_get(json_object_get(props, "optimizer"), "properties"), "momentum");
    cr_expect_eq(json_real_value(json_object_get(mom, "maximum")), 0.999999);
    json_t *bs = json_object_get(props, "batch_size");
    cr_expect_eq(json_integer_value(json_object_get(bs, "default")), 1048576);
    cr_expect_eq(json_integer_value(json_object_get(bs, "maximum")), SPEC_MAX_BATCH_SIZE);
    json_t *req = json_object_get(s, "required");
    cr_expect(json_array_size(req) == 1 && strcmp(json_string_value(json_array_get(req, 0)), "data") == 0,
              "only data is required at the top");
    json_decref(s);
    free(text);
}

/* Every row of the table is a property at its path, so a new field cannot be left out. */
Test(spec_schema, every_field_is_a_property)
{
    char *text = schema_text();
    json_t *s = json_loads(text, 0, NULL);
    cr_assert_not_null(s);
    static const char *const paths[][3] = {
        {"data", "shuffle", "buffer"}, {"model", "layers", NULL}, {"optimizer", "betas", NULL},
        {"init", NULL, NULL}, {"replicas", NULL, NULL}, {"device", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        json_t *o = s;
        for (int k = 0; k < 3 && paths[i][k]; k++)
            o = json_object_get(json_object_get(o, "properties"), paths[i][k]);
        cr_expect_not_null(o, "%s.%s has no schema", paths[i][0], paths[i][1] ? paths[i][1] : "");
    }
    json_decref(s);
    free(text);
}
