/* sha256.h — SHA-256 (FIPS 180-4) for SigV4 payload hashes and cache keys; small, so no libcrypto dependency. */
#ifndef TRAIND_STORAGE_SHA256_H
#define TRAIND_STORAGE_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint64_t len;          /* bytes hashed so far */
    unsigned char buf[64];
    size_t fill;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t n);
void sha256_final(struct sha256 *s, unsigned char out[32]);

/* One call: hex (64 lowercase digits + NUL) of data. */
void sha256_hex(const void *data, size_t n, char hex[65]);

#endif
