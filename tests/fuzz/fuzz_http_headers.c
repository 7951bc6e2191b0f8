/*
 * fuzz_http_headers.c — a response header line as a server sends it and curl hands it over
 * (storage/http.c's http_header_parse), in a buffer of exactly its size: no NUL after it.
 * Invariants: a status is at most three digits; an ETag fits its buffer, terminated, is bytes
 * of the line, and neither starts nor ends with blanks or a line end.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *line = (const char *)data;
    long status = -1;
    char etag[128];
    memset(etag, 'x', sizeof etag);
    size_t cap = size % 7 == 0 ? 1 : sizeof etag;   /* now and then the smallest buffer */
    int kind = http_header_parse(line, size, &status, etag, cap);
    if (kind == 1) {
        FUZZ_CHECK(status >= 0 && status <= 999, "status %ld", status);
    } else if (kind == 2) {
        size_t n = strnlen(etag, cap);
        FUZZ_CHECK(n < cap, "an unterminated ETag");
        bool text = !memchr(line, '\0', size);   /* else the ETag ends at the NUL, maybe after a blank */
        FUZZ_CHECK(n == 0 || !text || (!strchr(" \t", etag[0]) && (n == cap - 1 || !strchr(" \t\r\n", etag[n - 1]))),
                   "ETag '%s' is not trimmed", etag);
        FUZZ_CHECK(n == 0 || memmem(line, size, etag, n), "ETag '%s' is not from the line", etag);
    } else {
        FUZZ_CHECK(kind == 0 && status == -1, "kind %d", kind);
    }
    return 0;
}
