/* thrift.h — internal to storage/: a bounded reader of Thrift's compact protocol (Parquet's metadata). */
#ifndef TRAIND_STORAGE_THRIFT_H
#define TRAIND_STORAGE_THRIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Compact protocol types, as they appear in field headers and list headers. */
enum thrift_type {
    THRIFT_STOP = 0,
    THRIFT_TRUE = 1,
    THRIFT_FALSE = 2,
    THRIFT_I8 = 3,
    THRIFT_I16 = 4,
    THRIFT_I32 = 5,
    THRIFT_I64 = 6,
    THRIFT_DOUBLE = 7,
    THRIFT_BINARY = 8,
    THRIFT_LIST = 9,
    THRIFT_SET = 10,
    THRIFT_MAP = 11,
    THRIFT_STRUCT = 12,
};

/*
 * A cursor over [p, end). Every read checks the bytes left; the first failure sets
 * bad and every later read fails too, so a caller may check once at the end. Nesting
 * deeper than THRIFT_MAX_DEPTH is bad: hostile input cannot exhaust the stack.
 */
#define THRIFT_MAX_DEPTH 32

struct thrift_in {
    const unsigned char *p, *end;
    int depth;
    bool bad;
    const char *why; /* what was wrong, when bad */
};

/* Starts a struct: returns false when too deep. Each struct has its own last field id. */
bool thrift_struct_begin(struct thrift_in *t, int16_t *last_id);
void thrift_struct_end(struct thrift_in *t);

/* The next field of the current struct: true with *id and *type, false at its stop (or when bad). */
bool thrift_field(struct thrift_in *t, int16_t *last_id, int16_t *id, int *type);

/* Skips one value of any type, nested structs, lists, sets and maps included. */
bool thrift_skip(struct thrift_in *t, int type);

/* Values of a field of the given type: false (and bad) when the type is not the one expected. */
bool thrift_i32(struct thrift_in *t, int type, int32_t *v);
bool thrift_i64(struct thrift_in *t, int type, int64_t *v);
bool thrift_bool(struct thrift_in *t, int type, bool *v);
bool thrift_binary(struct thrift_in *t, int type, const unsigned char **s, size_t *n);

/* A list (or set) header: the element type and a count no larger than the bytes left. */
bool thrift_list(struct thrift_in *t, int type, int *elem, size_t *n);
/* A list element that is an i32 (list elements have no field header). */
bool thrift_elem_i32(struct thrift_in *t, int elem, int32_t *v);

#endif
