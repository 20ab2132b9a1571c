/* RIPEMD160 (Dobbertin, Bosselaers, Preneel 1996), portable; HASH160 on top of spn_sha256. */
#include "ripemd160.h"

#include <stdint.h>
#include <string.h>

#include "sha256.h"

/* Fewest digests for which the 8-lane AVX2 pass beats one scalar compression each. */
enum { AVX2_MIN = 3 };

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

/* Compress the 16 message words x into h. RIPEMD160 only ever hashes public data here
 * (keys, scripts), so nothing is wiped. */
static void compress_words(uint32_t h[5], const uint32_t x[16]) {
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
}

static void compress(uint32_t h[5], const unsigned char block64[64]) {
    uint32_t x[16];
    for (int i = 0; i < 16; i++) {
        const unsigned char *p = block64 + 4 * i;
        x[i] = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    }
    compress_words(h, x);
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
}

void spn_hash160(const unsigned char *data, size_t len, unsigned char out20[20]) {
    spn_sha256 s;
    unsigned char digest[32];
    spn_sha256_init(&s);
    spn_sha256_write(&s, data, len);
    spn_sha256_finalize(&s, digest);
    spn_ripemd160(digest, 32, out20);
}

/* RIPEMD160 message words of a 32-byte SHA256 digest given as its state words: the digest read
 * little-endian, then 0x80 and the bit length 256. */
static void digest_words(const uint32_t s[8], uint32_t x[16]) {
    for (int i = 0; i < 8; i++)
        x[i] = (s[i] >> 24) | ((s[i] >> 8) & 0xff00u) | ((s[i] << 8) & 0xff0000u) | (s[i] << 24);
    x[8] = 0x80;
    for (int i = 9; i < 16; i++) x[i] = 0;
    x[14] = 256;
}

/* ---- x86-64 AVX2: eight RIPEMD160 computations, one per 32-bit lane ---- */
#if defined(__x86_64__)
#include <immintrin.h>
#define SPN_AVX2 __attribute__((target("avx2")))

SPN_AVX2 static inline __m256i rol8(__m256i x, int n) {
    return _mm256_or_si256(_mm256_slli_epi32(x, n), _mm256_srli_epi32(x, 32 - n));
}

/* f of round j (0..4), with the same truth tables as f(). */
SPN_AVX2 static inline __m256i f8(int j, __m256i x, __m256i y, __m256i z) {
    const __m256i ones = _mm256_set1_epi32(-1);
    switch (j) {
        case 0: return _mm256_xor_si256(_mm256_xor_si256(x, y), z);
        case 1: return _mm256_xor_si256(z, _mm256_and_si256(x, _mm256_xor_si256(y, z)));
        case 2: return _mm256_xor_si256(_mm256_or_si256(x, _mm256_xor_si256(y, ones)), z);
        case 3: return _mm256_xor_si256(y, _mm256_and_si256(z, _mm256_xor_si256(x, y)));
        default: return _mm256_xor_si256(x, _mm256_or_si256(y, _mm256_xor_si256(z, ones)));
    }
}

/* out20[k] = RIPEMD160 of the 32-byte digest whose SHA256 state words are s[k], for k < m;
 * all eight rows of s are read. */
SPN_AVX2 static void ripemd_digests_x8(const uint32_t (*s)[8], size_t m, unsigned char (*out20)[20]) {
    const __m256i bswap = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7, 6,
                                           5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
    __m256i r[8], x[16];
    /* Transpose: row k holds the eight words of lane k; x[i] holds word i of every lane. */
    for (int k = 0; k < 8; k++) r[k] = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)s[k]), bswap);
    for (int k = 0; k < 8; k += 4) {
        __m256i t0 = _mm256_unpacklo_epi32(r[k], r[k + 1]), t1 = _mm256_unpackhi_epi32(r[k], r[k + 1]);
        __m256i t2 = _mm256_unpacklo_epi32(r[k + 2], r[k + 3]), t3 = _mm256_unpackhi_epi32(r[k + 2], r[k + 3]);
        r[k] = _mm256_unpacklo_epi64(t0, t2);
        r[k + 1] = _mm256_unpackhi_epi64(t0, t2);
        r[k + 2] = _mm256_unpacklo_epi64(t1, t3);
        r[k + 3] = _mm256_unpackhi_epi64(t1, t3);
    }
    for (int i = 0; i < 4; i++) {
        x[i] = _mm256_permute2x128_si256(r[i], r[i + 4], 0x20);
        x[i + 4] = _mm256_permute2x128_si256(r[i], r[i + 4], 0x31);
    }
    x[8] = _mm256_set1_epi32(0x80);
    for (int i = 9; i < 16; i++) x[i] = _mm256_setzero_si256();
    x[14] = _mm256_set1_epi32(256);

    __m256i h0 = _mm256_set1_epi32(0x67452301), h1 = _mm256_set1_epi32((int)0xefcdab89u),
            h2 = _mm256_set1_epi32((int)0x98badcfeu), h3 = _mm256_set1_epi32(0x10325476),
            h4 = _mm256_set1_epi32((int)0xc3d2e1f0u);
    __m256i al = h0, bl = h1, cl = h2, dl = h3, el = h4;
    __m256i ar = h0, br = h1, cr = h2, dr = h3, er = h4;
#pragma GCC unroll 5
    for (int j = 0; j < 5; j++) {
        const __m256i kl = _mm256_set1_epi32((int)KL[j]), kr = _mm256_set1_epi32((int)KR[j]);
#pragma GCC unroll 16
        for (int i = 16 * j; i < 16 * j + 16; i++) {
            __m256i t = _mm256_add_epi32(_mm256_add_epi32(al, f8(j, bl, cl, dl)), _mm256_add_epi32(x[RL[i]], kl));
            t = _mm256_add_epi32(rol8(t, SL[i]), el);
            al = el;
            el = dl;
            dl = rol8(cl, 10);
            cl = bl;
            bl = t;
            t = _mm256_add_epi32(_mm256_add_epi32(ar, f8(4 - j, br, cr, dr)), _mm256_add_epi32(x[RR[i]], kr));
            t = _mm256_add_epi32(rol8(t, SR[i]), er);
            ar = er;
            er = dr;
            dr = rol8(cr, 10);
            cr = br;
            br = t;
        }
    }
    uint32_t out[5][8] __attribute__((aligned(32)));
    _mm256_store_si256((__m256i *)out[0], _mm256_add_epi32(_mm256_add_epi32(h1, cl), dr));
    _mm256_store_si256((__m256i *)out[1], _mm256_add_epi32(_mm256_add_epi32(h2, dl), er));
    _mm256_store_si256((__m256i *)out[2], _mm256_add_epi32(_mm256_add_epi32(h3, el), ar));
    _mm256_store_si256((__m256i *)out[3], _mm256_add_epi32(_mm256_add_epi32(h4, al), br));
    _mm256_store_si256((__m256i *)out[4], _mm256_add_epi32(_mm256_add_epi32(h0, bl), cr));
    for (size_t k = 0; k < m; k++)
        for (int i = 0; i < 5; i++) memcpy(out20[k] + 4 * i, &out[i][k], 4); /* x86: little-endian */
}
#endif

enum { LANES = 8 };

void spn_hash160_33_many(const unsigned char *const *in33, size_t n, unsigned char (*out20)[20]) {
    uint32_t s[LANES][8];
    while (n) {
        size_t m = n < LANES ? n : LANES;
        spn_sha256_33_public(in33, m, s);
#if defined(__x86_64__)
        if (spn_cpu_avx2() && m >= AVX2_MIN) {
            if (m < LANES) memset(s[m], 0, (LANES - m) * sizeof s[0]);
            ripemd_digests_x8((const uint32_t (*)[8])s, m, out20);
        } else
#endif
        {
            for (size_t k = 0; k < m; k++) {
                uint32_t x[16], h[5];
                digest_words(s[k], x);
                init(h);
                compress_words(h, x);
                store(h, out20[k]);
            }
        }
        in33 += m;
        out20 += m;
        n -= m;
    }
}

void spn_hash160_33(const unsigned char in33[33], unsigned char out20[20]) {
    spn_hash160_33_many(&in33, 1, (unsigned char (*)[20])out20);
}

const char *spn_hash160_impl(void) {
#if defined(__x86_64__)
    if (spn_cpu_avx2()) return "avx2";
#endif
    return "portable";
}
