/* SipHash-2-4 (see siphash.h). */
#include "siphash.h"

#define ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1; v1 = ROTL64(v1, 13); v1 ^= v0; v0 = ROTL64(v0, 32);                              \
        v2 += v3; v3 = ROTL64(v3, 16); v3 ^= v2;                                                   \
        v0 += v3; v3 = ROTL64(v3, 21); v3 ^= v0;                                                   \
        v2 += v1; v1 = ROTL64(v1, 17); v1 ^= v2; v2 = ROTL64(v2, 32);                              \
    } while (0)

static uint64_t read_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

uint64_t spn_siphash24(const unsigned char key16[16], const unsigned char *in, size_t len) {
    const uint64_t k0 = read_le64(key16), k1 = read_le64(key16 + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    const size_t whole = len - len % 8;
    uint64_t m;
    for (size_t i = 0; i < whole; i += 8) {
        m = read_le64(in + i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    m = (uint64_t)(len & 0xff) << 56;
    for (size_t i = 0; i < len % 8; i++) m |= (uint64_t)in[whole + i] << (8 * i);
    v3 ^= m;
    SIPROUND;
    SIPROUND;
    v0 ^= m;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}
