/*
 * fuzz_spec.c — a POST /jobs body through the job spec (train/spec*.c): parsed as the API
 * parses it, and when accepted, stored and loaded again as the daemon does across a restart.
 * Invariant: the stored form is a fixed point, dump(parse(dump(parse(x)))) == dump(parse(x)),
 * and the stored form always parses.
 */
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "spec.h"

/* What the daemon writes to SQLite (daemon/db_write.c). */
#define STORE_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER)

static char *stored(const struct job_spec *s)
{
    json_t *j = spec_to_json(s);
    FUZZ_CHECK(j != NULL, "spec_to_json failed");
    char *text = json_dumps(j, STORE_FLAGS);
    FUZZ_CHECK(text != NULL, "json_dumps failed");
    json_decref(j);
    return text;
}

static struct job_spec *reload(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    FUZZ_CHECK(j != NULL, "a stored spec is not JSON: %s\n%s", je.text, text);
    struct job_spec *s = NULL;
    struct spec_error se;
    int rc = spec_parse(j, &s, &se);
    json_decref(j);
    FUZZ_CHECK(rc == 0, "a stored spec does not load: %s: %s\n%s", se.field, se.message, text);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);   /* as api/routes.c */
    if (!root)
        return 0;
    struct job_spec *first = NULL;
    struct spec_error se;
    memset(&se, 0, sizeof se);
    int rc = spec_parse(root, &first, &se);
    json_decref(root);
    FUZZ_CHECK(memchr(se.field, '\0', sizeof se.field) && memchr(se.message, '\0', sizeof se.message),
               "an unterminated spec_error");
    if (rc != 0)
        return 0;
    char *once = stored(first);
    struct job_spec *again = reload(once);
    char *twice = stored(again);
    FUZZ_CHECK(strcmp(once, twice) == 0, "the stored spec is not a fixed point\n%s\n%s", once, twice);
    free(once);
    free(twice);
    spec_free(first);
    spec_free(again);
    return 0;
}
