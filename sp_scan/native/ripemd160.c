/* RIPEMD160 (Dobbertin, Bosselaers, Preneel 1996), portable; HASH160 on top of spn_sha256. */
#include "ripemd160.h"

#include <stdint.h>
#include <string.h>

#include "sha256.h"

/* Message word order and rotation per step, left line then right line, 5 rounds of 16. */
static const unsigned char RL[80] = {
    0, 1, 2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 7,  4,  13, 1,  10, 6,  15, 3,  12, 0, 9,
    5, 2, 14, 11, 8,  3,  10, 14, 4,  9, 15, 8,  1,  2,  7,  0,  6,  13, 11, 5,  12, 1,  9,  11, 10, 0, 8,
    12, 4, 13, 3, 7,  15, 14, 5,  6,  2, 4,  0,  5,  9,  7,  12, 2,  10, 14, 1,  3,  8,  11, 6,  15, 13,
};
static const unsigned char RR[80] = {
    5,  14, 7,  0, 9, 2,  11, 4,  13, 6,  15, 8,  1,  10, 3,  12, 6,  11, 3, 7,  0,  13, 5,  10, 14, 15, 8,
    12, 4,  9,  1, 2, 15, 5,  1,  3,  7,  14, 6,  9,  11, 8,  12, 2,  10, 0, 4,  13, 8,  6,  4,  1,  3,  11,
    15, 0,  5,  12, 2, 13, 9,  7,  10, 14, 12, 15, 10, 4,  1,  5,  8,  7,  6, 2,  13, 14, 0,  3,  9,  11,
};
static const unsigned char SL[80] = {
    11, 14, 15, 12, 5,  8,  7,  9,  11, 13, 14, 15, 6,  7,  9,  8,  7,  6,  8,  13, 11, 9,  7,  15, 7,  12, 15,
    9,  11, 7,  13, 12, 11, 13, 6,  7,  14, 9,  13, 15, 14, 8,  13, 6,  5,  12, 7,  5,  11, 12, 14, 15, 14, 15,
    9,  8,  9,  14, 5,  6,  8,  6,  5,  12, 9,  15, 5,  11, 6,  8,  13, 12, 5,  12, 13, 14, 11, 8,  5,  6,
};
static const unsigned char SR[80] = {
    8,  9,  9,  11, 13, 15, 15, 5,  7,  7,  8,  11, 14, 14, 12, 6,  9,  13, 15, 7,  12, 8,  9,  11, 7, 7,  12,
    7,  6,  15, 13, 11, 9,  7,  15, 11, 8,  6,  6,  14, 12, 13, 5,  14, 13, 13, 7,  5,  15, 5,  8,  11, 14, 14,
    6,  14, 6,  9,  12, 9,  12, 5,  15, 8,  8,  5,  12, 9,  12, 5,  14, 6,  8,  13, 6,  5,  15, 13, 11, 11,
};
static const uint32_t KL[5] = {0x00000000ul, 0x5a827999ul, 0x6ed9eba1ul, 0x8f1bbcdcul, 0xa953fd4eul};
static const uint32_t KR[5] = {0x50a28be6ul, 0x5c4dd124ul, 0x6d703ef3ul, 0x7a6d76e9ul, 0x00000000ul};

static uint32_t rol(uint32_t x, unsigned n) { return (x << n) | (x >> ((32 - n) & 31)); }

/* Boolean function of round j (0..4). The left line uses j, the right line 4 - j. */
static inline uint32_t f(int j, uint32_t x, uint32_t y, uint32_t z) {
    switch (j) {
        case 0: return x ^ y ^ z;
        case 1: return (x & y) | (~x & z);
        case 2: return (x | ~y) ^ z;
        case 3: return (x & z) | (y & ~z);
        default: return x ^ (y | ~z);
    }
}

static void compress(uint32_t h[5], const unsigned char block64[64]) {
    uint32_t x[16];
    for (int i = 0; i < 16; i++) {
        const unsigned char *p = block64 + 4 * i;
        x[i] = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    }
    uint32_t al = h[0], bl = h[1], cl = h[2], dl = h[3], el = h[4];
    uint32_t ar = al, br = bl, cr = cl, dr = dl, er = el;
    /* Fully unrolled so table indices, rotations and f's choice become constants. */
#pragma GCC unroll 5
    for (int j = 0; j < 5; j++) {
#pragma GCC unroll 16
        for (int i = 16 * j; i < 16 * j + 16; i++) {
            uint32_t t = rol(al + f(j, bl, cl, dl) + x[RL[i]] + KL[j], SL[i]) + el;
            al = el;
            el = dl;
            dl = rol(cl, 10);
            cl = bl;
            bl = t;
            t = rol(ar + f(4 - j, br, cr, dr) + x[RR[i]] + KR[j], SR[i]) + er;
            ar = er;
            er = dr;
            dr = rol(cr, 10);
            cr = br;
            br = t;
        }
    }
    uint32_t t = h[1] + cl + dr;
    h[1] = h[2] + dl + er;
    h[2] = h[3] + el + ar;
    h[3] = h[4] + al + br;
    h[4] = h[0] + bl + cr;
    h[0] = t;
    spn_wipe(x, sizeof x);
}

static void init(uint32_t h[5]) {
    h[0] = 0x67452301ul;
    h[1] = 0xefcdab89ul;
    h[2] = 0x98badcfeul;
    h[3] = 0x10325476ul;
    h[4] = 0xc3d2e1f0ul;
}

static void store(const uint32_t h[5], unsigned char out20[20]) {
    for (int i = 0; i < 5; i++) {
        out20[4 * i] = (unsigned char)h[i];
        out20[4 * i + 1] = (unsigned char)(h[i] >> 8);
        out20[4 * i + 2] = (unsigned char)(h[i] >> 16);
        out20[4 * i + 3] = (unsigned char)(h[i] >> 24);
    }
}

void spn_ripemd160(const unsigned char *data, size_t len, unsigned char out20[20]) {
    uint32_t h[5];
    unsigned char block[64];
    size_t rest = len & 63;
    uint64_t bits = (uint64_t)len << 3;
    init(h);
    for (size_t off = 0; off + 64 <= len; off += 64) compress(h, data + off);
    memset(block, 0, sizeof block);
    if (rest) memcpy(block, data + (len - rest), rest);
    block[rest] = 0x80;
    if (rest >= 56) {
        compress(h, block);
        memset(block, 0, sizeof block);
    }
    for (int i = 0; i < 8; i++) block[56 + i] = (unsigned char)(bits >> (8 * i));
    compress(h, block);
    store(h, out20);
    spn_wipe(block, sizeof block);
    spn_wipe(h, sizeof h);
}

void spn_hash160(const unsigned char *data, size_t len, unsigned char out20[20]) {
    spn_sha256 s;
    unsigned char digest[32];
    spn_sha256_init(&s);
    spn_sha256_write(&s, data, len);
    spn_sha256_finalize(&s, digest);
    spn_ripemd160(digest, 32, out20);
    spn_wipe(digest, sizeof digest);
}

void spn_hash160_33(const unsigned char in33[33], unsigned char out20[20]) {
    static const uint32_t SHA256_IV[8] = {0x6a09e667ul, 0xbb67ae85ul, 0x3c6ef372ul, 0xa54ff53aul,
                                          0x510e527ful, 0x9b05688cul, 0x1f83d9abul, 0x5be0cd19ul};
    unsigned char block[64] = {0};
    uint32_t s[8], h[5];
    memcpy(block, in33, 33);
    block[33] = 0x80;
    block[62] = 0x01; /* 33 * 8 = 264 bits, big-endian */
    block[63] = 0x08;
    memcpy(s, SHA256_IV, sizeof s);
    spn_sha256_transform(s, block, 1);
    memset(block, 0, sizeof block);
    for (int i = 0; i < 8; i++) {
        block[4 * i] = (unsigned char)(s[i] >> 24);
        block[4 * i + 1] = (unsigned char)(s[i] >> 16);
        block[4 * i + 2] = (unsigned char)(s[i] >> 8);
        block[4 * i + 3] = (unsigned char)s[i];
    }
    block[32] = 0x80;
    block[57] = 0x01; /* 256 bits, little-endian */
    init(h);
    compress(h, block);
    store(h, out20);
}
