/* thrift.c — Thrift's compact protocol, read with a bound check on every byte. */
#include "thrift.h"

#include <string.h>

static bool fail(struct thrift_in *t, const char *why)
{
    if (!t->bad)
        t->why = why;
    t->bad = true;
    return false;
}

static bool byte(struct thrift_in *t, unsigned *b)
{
    if (t->bad)
        return false;
    if (t->p >= t->end)
        return fail(t, "metadata ends early");
    *b = *t->p++;
    return true;
}

/* ULEB128, at most 10 bytes (64 bits). */
static bool varint(struct thrift_in *t, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        unsigned b;
        if (!byte(t, &b))
            return false;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return fail(t, "varint longer than 64 bits");
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static bool zigzag(struct thrift_in *t, int64_t *v)
{
    uint64_t u;
    if (!varint(t, &u))
        return false;
    *v = unzigzag(u);
    return true;
}

static bool advance(struct thrift_in *t, uint64_t n)
{
    if (t->bad)
        return false;
    if (n > (uint64_t)(t->end - t->p))
        return fail(t, "a value runs past the end of the metadata");
    t->p += n;
    return true;
}

bool thrift_struct_begin(struct thrift_in *t, int16_t *last_id)
{
    *last_id = 0;
    if (t->bad)
        return false;
    if (++t->depth > THRIFT_MAX_DEPTH)
        return fail(t, "metadata nested too deeply");
    return true;
}

void thrift_struct_end(struct thrift_in *t)
{
    t->depth--;
}

bool thrift_field(struct thrift_in *t, int16_t *last_id, int16_t *id, int *type)
{
    unsigned b;
    if (!byte(t, &b))
        return false;
    *type = (int)(b & 0x0f);
    if (*type == THRIFT_STOP)
        return false;
    unsigned delta = b >> 4;
    if (delta) {
        *id = (int16_t)(*last_id + (int)delta);
    } else {
        int64_t v;
        if (!zigzag(t, &v))
            return false;
        if (v < INT16_MIN || v > INT16_MAX)
            return fail(t, "field id out of range");
        *id = (int16_t)v;
    }
    if (*type > THRIFT_STRUCT)
        return fail(t, "unknown field type");
    *last_id = *id;
    return true;
}

/* A value inside a list, set or map: booleans take a byte there, not a field header's type. */
static bool skip_elem(struct thrift_in *t, int type)
{
    if (type == THRIFT_TRUE || type == THRIFT_FALSE)
        return advance(t, 1);
    return thrift_skip(t, type);
}

static bool skip_list(struct thrift_in *t, int type)
{
    int elem;
    size_t n;
    if (!thrift_list(t, type, &elem, &n))
        return false;
    if (++t->depth > THRIFT_MAX_DEPTH)
        return fail(t, "metadata nested too deeply");
    for (size_t i = 0; i < n && !t->bad; i++)
        skip_elem(t, elem);
    t->depth--;
    return !t->bad;
}

static bool skip_map(struct thrift_in *t)
{
    uint64_t n;
    unsigned kv;
    if (!varint(t, &n))
        return false;
    if (n == 0)
        return true;
    if (n > (uint64_t)(t->end - t->p) || !byte(t, &kv))
        return fail(t, "a map is longer than the metadata");
    if (++t->depth > THRIFT_MAX_DEPTH)
        return fail(t, "metadata nested too deeply");
    for (uint64_t i = 0; i < n && !t->bad; i++) {
        skip_elem(t, (int)(kv >> 4));
        skip_elem(t, (int)(kv & 0x0f));
    }
    t->depth--;
    return !t->bad;
}

bool thrift_skip(struct thrift_in *t, int type)
{
    int64_t v;
    uint64_t n;
    switch (type) {
    case THRIFT_TRUE:
    case THRIFT_FALSE:
        return !t->bad; /* the value is in the field header */
    case THRIFT_I8:
        return advance(t, 1);
    case THRIFT_I16:
    case THRIFT_I32:
    case THRIFT_I64:
        return zigzag(t, &v);
    case THRIFT_DOUBLE:
        return advance(t, 8);
    case THRIFT_BINARY:
        return varint(t, &n) && advance(t, n);
    case THRIFT_LIST:
    case THRIFT_SET:
        return skip_list(t, type);
    case THRIFT_MAP:
        return skip_map(t);
    case THRIFT_STRUCT: {
        int16_t last, id;
        int ft;
        if (!thrift_struct_begin(t, &last))
            return false;
        while (thrift_field(t, &last, &id, &ft))
            thrift_skip(t, ft);
        thrift_struct_end(t);
        return !t->bad;
    }
    default:
        return fail(t, "unknown field type");
    }
}

bool thrift_i64(struct thrift_in *t, int type, int64_t *v)
{
    if (type != THRIFT_I64 && type != THRIFT_I32 && type != THRIFT_I16)
        return fail(t, "a field has the wrong type");
    return zigzag(t, v);
}

bool thrift_i32(struct thrift_in *t, int type, int32_t *v)
{
    int64_t w;
    if (type != THRIFT_I32 && type != THRIFT_I16)
        return fail(t, "a field has the wrong type");
    if (!zigzag(t, &w))
        return false;
    if (w < INT32_MIN || w > INT32_MAX)
        return fail(t, "an i32 field out of range");
    *v = (int32_t)w;
    return true;
}

bool thrift_bool(struct thrift_in *t, int type, bool *v)
{
    if (type != THRIFT_TRUE && type != THRIFT_FALSE)
        return fail(t, "a field has the wrong type");
    *v = type == THRIFT_TRUE;
    return !t->bad;
}

bool thrift_binary(struct thrift_in *t, int type, const unsigned char **s, size_t *n)
{
    uint64_t len;
    if (type != THRIFT_BINARY)
        return fail(t, "a field has the wrong type");
    if (!varint(t, &len))
        return false;
    const unsigned char *at = t->p;
    if (!advance(t, len))
        return false;
    *s = at;
    *n = (size_t)len;
    return true;
}

bool thrift_list(struct thrift_in *t, int type, int *elem, size_t *n)
{
    unsigned b;
    if (type != THRIFT_LIST && type != THRIFT_SET)
        return fail(t, "a field has the wrong type");
    if (!byte(t, &b))
        return false;
    uint64_t size = b >> 4;
    if (size == 15 && !varint(t, &size))
        return false;
    *elem = (int)(b & 0x0f);
    /* Every element takes a byte at least: a longer list cannot be in what is left. */
    if (size > (uint64_t)(t->end - t->p))
        return fail(t, "a list is longer than the metadata");
    *n = (size_t)size;
    return true;
}

bool thrift_elem_i32(struct thrift_in *t, int elem, int32_t *v)
{
    return thrift_i32(t, elem, v);
}
