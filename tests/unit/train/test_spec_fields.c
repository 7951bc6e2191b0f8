/* test_spec_fields.c — docs/spec.md's job spec field list is what `traind spec-fields` prints. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"
#include "tmpdir.h"

#define BEGIN "<!-- spec-fields begin -->\n"
#define END "<!-- spec-fields end -->"

Test(spec_fields, docs_spec_md_lists_the_fields_the_schema_has)
{
    const char *path = getenv("TRAIND_SPEC_DOC");
    cr_assert_not_null(path, "TRAIND_SPEC_DOC (docs/spec.md) is set by meson");
    char *doc = tmp_slurp(path);
    cr_assert_not_null(doc, "cannot read %s", path);
    char *begin = strstr(doc, BEGIN), *end = begin ? strstr(begin, END) : NULL;
    cr_assert(begin && end, "%s has no " BEGIN " ... " END " section", path);
    begin += strlen(BEGIN);
    *end = '\0';
    char *want = spec_fields_markdown();
    cr_assert_not_null(want);
    cr_expect_str_eq(begin, want, "docs/spec.md's field list differs from the schema's: paste the output of "
                     "`traind spec-fields` between its spec-fields markers");
    free(want);
    free(doc);
}

Test(spec_fields, every_field_has_a_row)
{
    char *md = spec_fields_markdown();
    cr_assert_not_null(md);
    static const char *const some[] = {"`optimizer.lr`", "`model.outputs`", "`data.shuffle.buffer`", "`init.from`",
                                       "`device`", "`epochs`"};
    for (size_t i = 0; i < sizeof some / sizeof some[0]; i++)
        cr_expect_not_null(strstr(md, some[i]), "%s has no row", some[i]);
    cr_expect_not_null(strstr(md, "`0.03` (sgd), `0.001` (adam, adamw)"), "the optimizers' own lr defaults");
    free(md);
}
