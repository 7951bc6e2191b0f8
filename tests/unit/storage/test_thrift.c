/* test_thrift.c — the compact protocol reader on bytes written by hand from Thrift's compact protocol spec. */
#include <criterion/criterion.h>
#include <string.h>

#include "thrift.h"

static struct thrift_in in(const unsigned char *p, size_t n)
{
    return (struct thrift_in){.p = p, .end = p + n};
}

/*
 * struct { 1: i32 = -3; 2: bool true; 3: struct { 1: list<struct{1: binary "ab"}> [one];
 * 2: map<binary, list<i64>> {"k": [5, 6]}; 3: double; 4: set<bool> {true, false}; }; 4: i8 7;
 * 20 (long form id): binary "xyz"; 21: i16 -1; 22: i64 = 300 } — then the field wanted: 23: i32 = 42.
 */
static const unsigned char nested[] = {
    0x15, 0x05,                                   /* 1: i32, zigzag(-3) = 5 */
    0x11,                                         /* 2: bool true */
    0x1c,                                         /* 3: struct */
      0x19, 0x1c, 0x18, 0x02, 'a', 'b', 0x00,     /*   1: list of 1 struct { 1: binary "ab" } */
      0x1b, 0x01, 0x89, 0x01, 'k', 0x26, 0x0a, 0x0c, /* 2: map 1 entry binary->list: "k" -> list<i64>[5, 6] */
      0x17, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,         /*   3: double 1.0 */
      0x1a, 0x21, 0x01, 0x02,                     /*   4: set of 2 bools */
      0x00,                                       /*   stop */
    0x13, 0x07,                                   /* 4: i8 */
    0x08, 0x28, 0x03, 'x', 'y', 'z',              /* 20 (long form: zigzag 40): binary "xyz" */
    0x14, 0x01,                                   /* 21: i16 -1 */
    0x16, 0xd8, 0x04,                             /* 22: i64 zigzag 600 = 300 */
    0x15, 0x54,                                   /* 23: i32 42 */
    0x00,
};

Test(thrift, unknown_fields_of_every_type_are_skipped_to_the_next_known_one)
{
    struct thrift_in t = in(nested, sizeof nested);
    int16_t last, id;
    int type;
    int32_t got = 0;
    cr_assert(thrift_struct_begin(&t, &last));
    while (thrift_field(&t, &last, &id, &type)) {
        if (id == 23)
            cr_assert(thrift_i32(&t, type, &got));
        else
            cr_assert(thrift_skip(&t, type), "field %d: %s", id, t.why);
    }
    thrift_struct_end(&t);
    cr_assert_not(t.bad, "%s", t.why);
    cr_assert_eq(got, 42);
    cr_assert_eq(t.p, nested + sizeof nested, "the reader stopped short of the end");
}

Test(thrift, every_truncation_is_bad_and_never_reads_past_the_end)
{
    for (size_t n = 0; n < sizeof nested; n++) {
        unsigned char *copy = malloc(n ? n : 1); /* exactly n bytes, so a sanitizer sees any overread */
        memcpy(copy, nested, n);
        struct thrift_in t = in(copy, n);
        cr_assert_not(thrift_skip(&t, THRIFT_STRUCT), "a struct cut to %zu bytes was read whole", n);
        cr_assert(t.bad);
        free(copy);
    }
}

Test(thrift, nesting_past_the_limit_is_bad)
{
    unsigned char deep[2 * THRIFT_MAX_DEPTH + 4];
    for (size_t i = 0; i < sizeof deep; i++)
        deep[i] = 0x1c; /* field 1: struct, again and again */
    struct thrift_in t = in(deep, sizeof deep);
    cr_assert_not(thrift_skip(&t, THRIFT_STRUCT));
    cr_assert_str_eq(t.why, "metadata nested too deeply");
}

Test(thrift, a_list_longer_than_the_bytes_left_is_bad)
{
    static const unsigned char l[] = {0xf5, 0xff, 0xff, 0x03, 0x02}; /* list<i32> of 65535 elements */
    struct thrift_in t = in(l, sizeof l);
    int elem;
    size_t n;
    cr_assert_not(thrift_list(&t, THRIFT_LIST, &elem, &n));
    cr_assert(t.bad);
}

Test(thrift, a_field_of_the_wrong_type_is_bad)
{
    static const unsigned char s[] = {0x03, 'a', 'b', 'c'};
    struct thrift_in t = in(s, sizeof s);
    int32_t v;
    cr_assert_not(thrift_i32(&t, THRIFT_BINARY, &v));
    cr_assert(t.bad);
}
