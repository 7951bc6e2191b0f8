/* test_buf.c — util/buf: a growing byte buffer kept NUL-terminated. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

Test(buf, pieces_of_every_size_arrive_whole_and_nul_terminated)
{
    enum { TOTAL = 300000 };
    char *want = malloc(TOTAL), *p = NULL;
    cr_assert_not_null(want);
    for (size_t i = 0; i < TOTAL; i++)
        want[i] = (char)('a' + (i * 7) % 26);
    size_t len = 0, cap = 0, at = 0;
    for (size_t piece = 0; at < TOTAL; piece = (piece * 13 + 5) % 9000) {   /* 0 .. 8999 bytes */
        size_t n = piece < TOTAL - at ? piece : TOTAL - at;
        cr_assert_eq(buf_append(&p, &len, &cap, want + at, n), 0);
        at += n;
        cr_assert_eq(len, at);
        cr_assert_eq(p[len], '\0', "no NUL after %zu bytes", len);
    }
    cr_expect_eq(memcmp(p, want, TOTAL), 0);
    cr_expect_eq(strlen(p), (size_t)TOTAL);
    free(p);
    free(want);
}

Test(buf, capacity_starts_at_4096_and_doubles)
{
    char *p = NULL;
    size_t len = 0, cap = 0;
    cr_assert_eq(buf_append(&p, &len, &cap, "x", 1), 0);
    cr_expect_eq(cap, 4096);
    char block[5000];
    memset(block, 'y', sizeof block);
    cr_assert_eq(buf_append(&p, &len, &cap, block, sizeof block), 0);
    cr_expect_eq(cap, 8192, "cap %zu for %zu bytes", cap, len + 1);
    char *before = p;
    cr_assert_eq(buf_reserve(&p, &cap, 100), 0);
    cr_expect_eq(p, before, "a reserve below the capacity moved the buffer");
    cr_expect_eq(cap, 8192);
    free(p);
}

Test(buf, a_size_that_cannot_be_held_fails_and_changes_nothing)
{
    char *p = NULL;
    size_t len = 0, cap = 0;
    cr_assert_eq(buf_append(&p, &len, &cap, "abc", 3), 0);
    char *before = p;
    cr_expect_eq(buf_append(&p, &len, &cap, "abc", SIZE_MAX - 2), -1);
    cr_expect_eq(buf_reserve(&p, &cap, SIZE_MAX), -1);
    cr_expect_eq(p, before);
    cr_expect_eq(len, 3);
    cr_expect_eq(cap, 4096);
    cr_expect_str_eq(p, "abc");
    free(p);
}
