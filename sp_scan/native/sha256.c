/* SHA256 (FIPS 180-4): portable, x86-64 SHA-NI and ARMv8 SHA2 compressions behind one pointer.
 * No branch or memory index depends on the hashed bytes; only lengths steer control flow. */
#include "sha256.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define SPN_SHANI __attribute__((target("sha,sse4.1,ssse3")))
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_SHA2
#define HWCAP_SHA2 (1 << 6)
#endif
#if defined(__clang__)
#define SPN_ARMV8 __attribute__((target("sha2")))
#else
#define SPN_ARMV8 __attribute__((target("+crypto")))
#endif
#endif

static const uint32_t K[64] = {
    0x428a2f98ul, 0x71374491ul, 0xb5c0fbcful, 0xe9b5dba5ul, 0x3956c25bul, 0x59f111f1ul, 0x923f82a4ul, 0xab1c5ed5ul,
    0xd807aa98ul, 0x12835b01ul, 0x243185beul, 0x550c7dc3ul, 0x72be5d74ul, 0x80deb1feul, 0x9bdc06a7ul, 0xc19bf174ul,
    0xe49b69c1ul, 0xefbe4786ul, 0x0fc19dc6ul, 0x240ca1ccul, 0x2de92c6ful, 0x4a7484aaul, 0x5cb0a9dcul, 0x76f988daul,
    0x983e5152ul, 0xa831c66dul, 0xb00327c8ul, 0xbf597fc7ul, 0xc6e00bf3ul, 0xd5a79147ul, 0x06ca6351ul, 0x14292967ul,
    0x27b70a85ul, 0x2e1b2138ul, 0x4d2c6dfcul, 0x53380d13ul, 0x650a7354ul, 0x766a0abbul, 0x81c2c92eul, 0x92722c85ul,
    0xa2bfe8a1ul, 0xa81a664bul, 0xc24b8b70ul, 0xc76c51a3ul, 0xd192e819ul, 0xd6990624ul, 0xf40e3585ul, 0x106aa070ul,
    0x19a4c116ul, 0x1e376c08ul, 0x2748774cul, 0x34b0bcb5ul, 0x391c0cb3ul, 0x4ed8aa4aul, 0x5b9cca4ful, 0x682e6ff3ul,
    0x748f82eeul, 0x78a5636ful, 0x84c87814ul, 0x8cc70208ul, 0x90befffaul, 0xa4506cebul, 0xbef9a3f7ul, 0xc67178f2ul,
};

static const uint32_t IV[8] = {
    0x6a09e667ul, 0xbb67ae85ul, 0x3c6ef372ul, 0xa54ff53aul, 0x510e527ful, 0x9b05688cul, 0x1f83d9abul, 0x5be0cd19ul,
};

/* State after compressing the block SHA256(tag)||SHA256(tag) from IV, for the BIP352 tags
 * "BIP0352/Inputs", "BIP0352/SharedSecret", "BIP0352/Label" (in SPN_TAG_* order).
 * tests/test_native_hash.py recomputes them with an independent compression checked against hashlib. */
static const uint32_t TAG_MIDSTATE[3][8] = {
    {0xd4143ffcul, 0x012ea4b5ul, 0x36e21c8ful, 0xf7ec7b54ul, 0x4dd4e2acul, 0x9bcaa0a4ul, 0xe244899bul, 0xcd06903eul},
    {0x88831537ul, 0x5127079bul, 0x69c2137bul, 0xab0303e6ul, 0x98fa21faul, 0x4a888523ul, 0xbd99daabul, 0xf25e5e0aul},
    {0x26b95d63ul, 0x8bf1b740ul, 0x10a5986ful, 0x06a387a5ul, 0x2d1c1c30ul, 0xd035951aul, 0x2d7f0f96ul, 0x29e3e0dbul},
};

void spn_wipe(void *p, size_t n) {
    memset(p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
}

static uint32_t load_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void store_be32(unsigned char *p, uint32_t x) {
    p[0] = (unsigned char)(x >> 24);
    p[1] = (unsigned char)(x >> 16);
    p[2] = (unsigned char)(x >> 8);
    p[3] = (unsigned char)x;
}

/* ---- portable ---- */

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

/* Compress with the caller's schedule buffer w (left holding data-derived words). */
static void compress_portable(uint32_t s[8], const unsigned char *blocks, size_t nblocks, uint32_t w[16]) {
    for (; nblocks; nblocks--, blocks += 64) {
        uint32_t a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
#pragma GCC unroll 64
        for (int i = 0; i < 64; i++) {
            uint32_t wi;
            if (i < 16) {
                wi = load_be32(blocks + 4 * i);
            } else {
                uint32_t w15 = w[(i - 15) & 15], w2 = w[(i - 2) & 15];
                wi = w[i & 15] + (ROR(w15, 7) ^ ROR(w15, 18) ^ (w15 >> 3)) + w[(i - 7) & 15] +
                     (ROR(w2, 17) ^ ROR(w2, 19) ^ (w2 >> 10));
            }
            w[i & 15] = wi;
            uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + wi;
            uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            h = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        s[0] += a;
        s[1] += b;
        s[2] += c;
        s[3] += d;
        s[4] += e;
        s[5] += f;
        s[6] += g;
        s[7] += h;
    }
}

static void transform_portable(uint32_t s[8], const unsigned char *blocks, size_t nblocks) {
    uint32_t w[16];
    compress_portable(s, blocks, nblocks, w);
    spn_wipe(w, sizeof w);
}

/* ---- x86-64 SHA-NI ----
 * The state lives in two registers: abef = (a,b,e,f) and cdgh = (c,d,g,h), highest lane first.
 * Each sha256rnds2 does two rounds with the low two lanes of its message+constant operand. */
#if defined(__x86_64__)

SPN_SHANI static inline void shani_rounds4(__m128i *abef, __m128i *cdgh, __m128i w, int i) {
    __m128i wk = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&K[i]));
    *cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, wk);
    *abef = _mm_sha256rnds2_epu32(*abef, *cdgh, _mm_shuffle_epi32(wk, 0x0E));
}

/* Next four schedule words from the previous sixteen (w16 oldest). */
SPN_SHANI static inline __m128i shani_schedule(__m128i w16, __m128i w12, __m128i w8, __m128i w4) {
    __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(w16, w12), _mm_alignr_epi8(w4, w8, 4));
    return _mm_sha256msg2_epu32(t, w4);
}

/* State words s[0..8) <-> the (a,b,e,f), (c,d,g,h) register pair. */
SPN_SHANI static inline void shani_pack(const uint32_t s[8], __m128i *abef, __m128i *cdgh) {
    __m128i dcba = _mm_loadu_si128((const __m128i *)&s[0]); /* lanes a,b,c,d from low */
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&s[4]);
    __m128i badc = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    *abef = _mm_alignr_epi8(badc, efgh, 8);
    *cdgh = _mm_blend_epi16(efgh, badc, 0xF0);
}

SPN_SHANI static inline void shani_unpack(__m128i abef, __m128i cdgh, uint32_t s[8]) {
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i hgdc = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&s[0], _mm_blend_epi16(feba, hgdc, 0xF0));
    _mm_storeu_si128((__m128i *)&s[4], _mm_alignr_epi8(hgdc, feba, 8));
}

SPN_SHANI static void transform_shani(uint32_t s[8], const unsigned char *blocks, size_t nblocks) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i abef, cdgh;
    shani_pack(s, &abef, &cdgh);
    for (; nblocks; nblocks--, blocks += 64) {
        __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i w0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blocks + 0)), bswap);
        __m128i w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blocks + 16)), bswap);
        __m128i w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blocks + 32)), bswap);
        __m128i w3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blocks + 48)), bswap);
        shani_rounds4(&abef, &cdgh, w0, 0);
        shani_rounds4(&abef, &cdgh, w1, 4);
        shani_rounds4(&abef, &cdgh, w2, 8);
        shani_rounds4(&abef, &cdgh, w3, 12);
        for (int i = 16; i < 64; i += 16) {
            w0 = shani_schedule(w0, w1, w2, w3);
            shani_rounds4(&abef, &cdgh, w0, i);
            w1 = shani_schedule(w1, w2, w3, w0);
            shani_rounds4(&abef, &cdgh, w1, i + 4);
            w2 = shani_schedule(w2, w3, w0, w1);
            shani_rounds4(&abef, &cdgh, w2, i + 8);
            w3 = shani_schedule(w3, w0, w1, w2);
            shani_rounds4(&abef, &cdgh, w3, i + 12);
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    shani_unpack(abef, cdgh, s);
}

/* Schedule words 0..15 of the padded block of a 33-byte message: the message, 0x80, zeros and
 * the bit length 264 (big-endian), without building the block in memory. */
SPN_SHANI static inline void shani_load33(const unsigned char in33[33], __m128i w[4]) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    w[0] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)in33), bswap);
    w[1] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(in33 + 16)), bswap);
    w[2] = _mm_set_epi32(0, 0, 0, (int)(((uint32_t)in33[32] << 24) | 0x800000u));
    w[3] = _mm_set_epi32(33 * 8, 0, 0, 0);
}

/* SHA256 states of two 33-byte messages, compressed side by side: one SHA-NI chain is bound by
 * the latency of sha256rnds2, two independent chains fill its throughput. */
SPN_SHANI static void sha256_33_x2_shani(const unsigned char *in0, const unsigned char *in1, uint32_t s0[8],
                                         uint32_t s1[8]) {
    __m128i iv_abef, iv_cdgh, x[4], y[4];
    shani_pack(IV, &iv_abef, &iv_cdgh);
    __m128i abef0 = iv_abef, cdgh0 = iv_cdgh, abef1 = iv_abef, cdgh1 = iv_cdgh;
    shani_load33(in0, x);
    shani_load33(in1, y);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        shani_rounds4(&abef0, &cdgh0, x[j], 4 * j);
        shani_rounds4(&abef1, &cdgh1, y[j], 4 * j);
    }
#pragma GCC unroll 12
    for (int i = 16; i < 64; i += 4) {
        int j = (i / 4) & 3;
        x[j] = shani_schedule(x[j], x[(j + 1) & 3], x[(j + 2) & 3], x[(j + 3) & 3]);
        y[j] = shani_schedule(y[j], y[(j + 1) & 3], y[(j + 2) & 3], y[(j + 3) & 3]);
        shani_rounds4(&abef0, &cdgh0, x[j], i);
        shani_rounds4(&abef1, &cdgh1, y[j], i);
    }
    shani_unpack(_mm_add_epi32(abef0, iv_abef), _mm_add_epi32(cdgh0, iv_cdgh), s0);
    shani_unpack(_mm_add_epi32(abef1, iv_abef), _mm_add_epi32(cdgh1, iv_cdgh), s1);
}

static int cpu_has_shani(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & bit_SSE4_1) || !(c & bit_SSSE3)) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 29) & 1;
}

/* AVX2 in the CPU, and the OS saves the YMM registers (OSXSAVE, then XCR0 bits 1 and 2). */
static int cpu_has_avx2(void) {
    unsigned a, b, c, d, xcr0_lo, xcr0_hi;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0_lo & 6) != 6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b & bit_AVX2) != 0;
}

#endif

/* ---- ARMv8 SHA2 ---- */
#if defined(SPN_ARMV8)

SPN_ARMV8 static inline void armv8_rounds4(uint32x4_t *abcd, uint32x4_t *efgh, uint32x4_t w, int i) {
    uint32x4_t wk = vaddq_u32(w, vld1q_u32(&K[i]));
    uint32x4_t abcd0 = *abcd;
    *abcd = vsha256hq_u32(*abcd, *efgh, wk);
    *efgh = vsha256h2q_u32(*efgh, abcd0, wk);
}

SPN_ARMV8 static void transform_armv8(uint32_t s[8], const unsigned char *blocks, size_t nblocks) {
    uint32x4_t abcd = vld1q_u32(&s[0]), efgh = vld1q_u32(&s[4]);
    for (; nblocks; nblocks--, blocks += 64) {
        uint32x4_t abcd0 = abcd, efgh0 = efgh;
        uint32x4_t w0 = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(blocks + 0)));
        uint32x4_t w1 = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(blocks + 16)));
        uint32x4_t w2 = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(blocks + 32)));
        uint32x4_t w3 = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(blocks + 48)));
        armv8_rounds4(&abcd, &efgh, w0, 0);
        armv8_rounds4(&abcd, &efgh, w1, 4);
        armv8_rounds4(&abcd, &efgh, w2, 8);
        armv8_rounds4(&abcd, &efgh, w3, 12);
        for (int i = 16; i < 64; i += 16) {
            w0 = vsha256su1q_u32(vsha256su0q_u32(w0, w1), w2, w3);
            armv8_rounds4(&abcd, &efgh, w0, i);
            w1 = vsha256su1q_u32(vsha256su0q_u32(w1, w2), w3, w0);
            armv8_rounds4(&abcd, &efgh, w1, i + 4);
            w2 = vsha256su1q_u32(vsha256su0q_u32(w2, w3), w0, w1);
            armv8_rounds4(&abcd, &efgh, w2, i + 8);
            w3 = vsha256su1q_u32(vsha256su0q_u32(w3, w0), w1, w2);
            armv8_rounds4(&abcd, &efgh, w3, i + 12);
        }
        abcd = vaddq_u32(abcd, abcd0);
        efgh = vaddq_u32(efgh, efgh0);
    }
    vst1q_u32(&s[0], abcd);
    vst1q_u32(&s[4], efgh);
}

#endif

/* ---- selection ---- */

typedef void (*transform_fn)(uint32_t s[8], const unsigned char *blocks, size_t nblocks);

static transform_fn transform = transform_portable;
static const char *transform_name = "portable";
static int use_shani, use_avx2;

void spn_sha256_select(int force_portable) {
    const char *env = getenv("SP_SCAN_SHA256");
    transform_fn fn = transform_portable;
    const char *name = "portable";
    int shani = 0, avx2 = 0;
    if (!force_portable && !(env && strcmp(env, "portable") == 0)) {
#if defined(__x86_64__)
        if (cpu_has_shani()) {
            fn = transform_shani;
            name = "shani";
            shani = 1;
        }
        avx2 = cpu_has_avx2();
#elif defined(SPN_ARMV8)
        if (getauxval(AT_HWCAP) & HWCAP_SHA2) {
            fn = transform_armv8;
            name = "armv8";
        }
#endif
    }
    transform = fn;
    transform_name = name;
    use_shani = shani;
    use_avx2 = avx2;
}

const char *spn_sha256_impl(void) { return transform_name; }

int spn_cpu_avx2(void) { return use_avx2; }

void spn_sha256_transform(uint32_t s[8], const unsigned char *blocks, size_t nblocks) {
    transform(s, blocks, nblocks);
}

void spn_sha256_33_public(const unsigned char *const *in33, size_t n, uint32_t (*s)[8]) {
    size_t i = 0;
#if defined(__x86_64__)
    if (use_shani) {
        for (; i + 2 <= n; i += 2) sha256_33_x2_shani(in33[i], in33[i + 1], s[i], s[i + 1]);
        if (i < n) {
            uint32_t spare[8];
            sha256_33_x2_shani(in33[i], in33[i], s[i], spare);
        }
        return;
    }
#endif
    for (; i < n; i++) {
        unsigned char block[64] = {0};
        uint32_t w[16];
        memcpy(block, in33[i], 33);
        block[33] = 0x80;
        block[62] = (33 * 8) >> 8; /* bit length, big-endian */
        block[63] = (33 * 8) & 0xff;
        memcpy(s[i], IV, sizeof IV);
        if (transform == transform_portable) {
            compress_portable(s[i], block, 1, w);
        } else {
            transform(s[i], block, 1);
        }
    }
}

/* ---- streaming ---- */

void spn_sha256_init(spn_sha256 *h) {
    memcpy(h->s, IV, sizeof IV);
    h->bytes = 0;
}

void spn_sha256_init_tagged(spn_sha256 *h, int tag) {
    if (tag < 0 || tag > 2) tag = SPN_TAG_INPUTS;
    memcpy(h->s, TAG_MIDSTATE[tag], sizeof h->s);
    h->bytes = 64;
}

void spn_sha256_write(spn_sha256 *h, const unsigned char *data, size_t len) {
    size_t used = (size_t)(h->bytes & 63);
    h->bytes += len;
    if (used) {
        size_t take = 64 - used;
        if (len < take) {
            if (len) memcpy(h->buf + used, data, len);
            return;
        }
        memcpy(h->buf + used, data, take);
        transform(h->s, h->buf, 1);
        data += take;
        len -= take;
    }
    if (len >= 64) {
        transform(h->s, data, len / 64);
        data += len & ~(size_t)63;
        len &= 63;
    }
    if (len) memcpy(h->buf, data, len);
}

void spn_sha256_finalize(spn_sha256 *h, unsigned char out32[32]) {
    static const unsigned char pad[64] = {0x80};
    unsigned char len8[8];
    uint64_t bits = h->bytes << 3;
    store_be32(len8, (uint32_t)(bits >> 32));
    store_be32(len8 + 4, (uint32_t)bits);
    spn_sha256_write(h, pad, 1 + ((119 - (h->bytes & 63)) & 63));
    spn_sha256_write(h, len8, 8);
    for (int i = 0; i < 8; i++) store_be32(out32 + 4 * i, h->s[i]);
    spn_wipe(h, sizeof *h);
}

void spn_tagged_sha256(int tag, const unsigned char *msg, size_t len, unsigned char out32[32]) {
    spn_sha256 h;
    spn_sha256_init_tagged(&h, tag);
    spn_sha256_write(&h, msg, len);
    spn_sha256_finalize(&h, out32);
}
