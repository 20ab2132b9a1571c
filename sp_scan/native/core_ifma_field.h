/* 8-lane arithmetic mod p = 2^256 − 0x1000003D1 with AVX-512 IFMA (private to core_ifma*.c).
 *
 * An fe8 holds 8 field elements, one per 64-bit lane, as 5 limbs of radix 2^52: value = Σ l[i]·2^(52i).
 * vpmadd52luq/huq read only the low 52 bits of their multiplicands, so every multiplicand must be
 * *carried*: limbs 0..3 below 2^52 and the whole value below 2^260 (then limb 4 < 2^52 too).
 *
 * Bounds are tracked by "magnitude" m: a carried value with limb 4 below m·(2^48 + 2^12), so value
 * below m·2^256·(1 + 2^-36).
 *   - mul/sqr/normw output: carried, limb 4 < 2^48 + 2^12, m = 1 (value < 2^256 + 2^221 < 2p).
 *   - add(a, b) + carry: m_a + m_b.   sub(a, b, c) + carry: m_a + c, needs m_b < c (see fe8_sub).
 *   - mul/sqr need carried inputs with m ≤ 15; mul_small results go through normw.
 * Each formula in core_ifma.c states the magnitudes it relies on.
 *
 * No function branches on or indexes memory by a lane's value. */
#ifndef SPN_CORE_IFMA_FIELD_H
#define SPN_CORE_IFMA_FIELD_H

#include <immintrin.h>
#include <stdint.h>

/* Under AddressSanitizer, GCC moves the 64-byte-aligned locals of these functions to its
 * use-after-return fake stack without keeping their alignment (aligned AVX-512 accesses then fault),
 * so the AVX-512 functions are built uninstrumented. They never touch caller memory themselves:
 * reads and writes of callers' buffers go through plain helpers, which ASan does check. */
#if defined(__SANITIZE_ADDRESS__)
#define SPN_IFMA_NOASAN __attribute__((no_sanitize_address))
#else
#define SPN_IFMA_NOASAN
#endif
#define SPN_IFMA_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512ifma"))) SPN_IFMA_NOASAN
#define IFMA_INLINE static inline __attribute__((always_inline)) SPN_IFMA_TARGET
/* Field loops run over limbs: fully unrolled, so the limbs stay in registers. */
#define SPN_UNROLL _Pragma("GCC unroll 32")

typedef struct {
    __m512i l[5];
} fe8;

#define M52 0xFFFFFFFFFFFFFULL
#define M48 0xFFFFFFFFFFFFULL
#define FE_C 0x1000003D1ULL   /* 2^256 ≡ C (mod p) */
#define FE_R 0x1000003D10ULL  /* 2^260 ≡ 16·C = R */

/* limb i of c·p, for the subtraction constants: p = (2^52 − C, 2^52 − 1, 2^52 − 1, 2^52 − 1, 2^48 − 1) */
#define P_LIMB(c, i) ((uint64_t)(c) * ((i) == 0 ? M52 + 1 - FE_C : (i) == 4 ? M48 : M52))

IFMA_INLINE __m512i v1(uint64_t x) { return _mm512_set1_epi64((long long)x); }
IFMA_INLINE __m512i lo52(__m512i acc, __m512i a, __m512i b) { return _mm512_madd52lo_epu64(acc, a, b); }
IFMA_INLINE __m512i hi52(__m512i acc, __m512i a, __m512i b) { return _mm512_madd52hi_epu64(acc, a, b); }

IFMA_INLINE void fe8_set1(fe8 *r, uint64_t small) {
    r->l[0] = v1(small);
    SPN_UNROLL
    for (int i = 1; i < 5; i++) r->l[i] = _mm512_setzero_si512();
}

/* Carry limbs 0..3 into the next one; limb 4 keeps the rest. Needs value < 2^260 for a carried result. */
IFMA_INLINE void fe8_carry(fe8 *r) {
    const __m512i m = v1(M52);
    SPN_UNROLL
    for (int i = 0; i < 4; i++) {
        r->l[i + 1] = _mm512_add_epi64(r->l[i + 1], _mm512_srli_epi64(r->l[i], 52));
        r->l[i] = _mm512_and_si512(r->l[i], m);
    }
}

/* Weak normalisation of limbs below 2^63: fold limb 4's bits from 2^48 up (2^256 ≡ C) into limbs 0
 * and 1 first, then carry once. The carry into limb 4 is below 2^12, so the result is carried with
 * limb 4 < 2^48 + 2^12: m = 1. */
IFMA_INLINE void fe8_normw(fe8 *r) {
    __m512i top = _mm512_srli_epi64(r->l[4], 48); /* < 2^16 */
    r->l[4] = _mm512_and_si512(r->l[4], v1(M48));
    r->l[0] = lo52(r->l[0], top, v1(FE_C));
    r->l[1] = hi52(r->l[1], top, v1(FE_C));
    fe8_carry(r);
}

/* Products of carried a, b in columns t[0..9] (t[k] < 9·2^52), reduced to m = 1. */
IFMA_INLINE void fe8_reduce(fe8 *r, __m512i t[10]) {
    const __m512i m = v1(M52), rr = v1(FE_R), zero = _mm512_setzero_si512();
    /* Carry the high half: it is below 2^260 (the product is below 2^520), so columns 5..9 become
     * exact 52-bit digits. */
    SPN_UNROLL
    for (int k = 5; k < 9; k++) {
        t[k + 1] = _mm512_add_epi64(t[k + 1], _mm512_srli_epi64(t[k], 52));
        t[k] = _mm512_and_si512(t[k], m);
    }
    /* 2^260 ≡ R: column 5 + i adds lo(t·R) to limb i and hi(t·R) to limb i + 1; column 9's high part
     * e < 2^37 lands at 2^260 again. */
    SPN_UNROLL
    for (int i = 0; i < 5; i++) {
        t[i] = lo52(t[i], t[5 + i], rr);
        if (i < 4) t[i + 1] = hi52(t[i + 1], t[5 + i], rr);
    }
    __m512i e = hi52(zero, t[9], rr);
    /* Fold limb 4 from bit 48 up together with e·2^4 (both counted in units of 2^256 ≡ C), then carry
     * once: limbs 0..3 end below 2^52 and limb 4 below 2^48 + 2^5. */
    __m512i top = _mm512_add_epi64(_mm512_srli_epi64(t[4], 48), _mm512_slli_epi64(e, 4)); /* < 2^42 */
    t[4] = _mm512_and_si512(t[4], v1(M48));
    t[0] = lo52(t[0], top, v1(FE_C));
    t[1] = hi52(t[1], top, v1(FE_C));
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = t[i];
    fe8_carry(r);
}

/* r = a·b; a, b carried (m ≤ 15). r may alias a or b. */
IFMA_INLINE void fe8_mul(fe8 *r, const fe8 *a, const fe8 *b) {
    __m512i t[10];
    SPN_UNROLL
    for (int k = 0; k < 10; k++) t[k] = _mm512_setzero_si512();
    SPN_UNROLL
    for (int i = 0; i < 5; i++)
        SPN_UNROLL
        for (int j = 0; j < 5; j++) {
            t[i + j] = lo52(t[i + j], a->l[i], b->l[j]);
            t[i + j + 1] = hi52(t[i + j + 1], a->l[i], b->l[j]);
        }
    fe8_reduce(r, t);
}

/* r = a²; a carried (m ≤ 15). Squarings come in long dependent chains (inversion, square root), so
 * the low and high halves go to separate accumulators: shorter chains of dependent IFMAs. */
IFMA_INLINE void fe8_sqr(fe8 *r, const fe8 *a) {
    __m512i t[10], h[10];
    SPN_UNROLL
    for (int k = 0; k < 10; k++) t[k] = h[k] = _mm512_setzero_si512();
    SPN_UNROLL
    for (int i = 0; i < 5; i++)
        SPN_UNROLL
        for (int j = i + 1; j < 5; j++) {
            t[i + j] = lo52(t[i + j], a->l[i], a->l[j]);
            h[i + j + 1] = hi52(h[i + j + 1], a->l[i], a->l[j]);
        }
    SPN_UNROLL
    for (int k = 1; k < 10; k++) {
        t[k] = _mm512_add_epi64(t[k], h[k]);
        t[k] = _mm512_add_epi64(t[k], t[k]);
    }
    SPN_UNROLL
    for (int i = 0; i < 5; i++) {
        t[2 * i] = lo52(t[2 * i], a->l[i], a->l[i]);
        t[2 * i + 1] = hi52(t[2 * i + 1], a->l[i], a->l[i]);
    }
    fe8_reduce(r, t);
}

/* r = a squared n times (n ≥ 1). */
IFMA_INLINE void fe8_sqr_n(fe8 *r, const fe8 *a, int n) {
    fe8_sqr(r, a);
    for (int i = 1; i < n; i++) fe8_sqr(r, r);
}

/* r = a + b, carried: needs m_a + m_b ≤ 15. */
IFMA_INLINE void fe8_add(fe8 *r, const fe8 *a, const fe8 *b) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = _mm512_add_epi64(a->l[i], b->l[i]);
    fe8_carry(r);
}

/* r = a + c·p − b, carried: needs b carried with m_b < c (c ≥ 2), and m_a + c ≤ 15. Every limb of
 * c·p is at least those of b (limbs 0..3: c·(2^52 − C) ≥ 2^52; limb 4: c·(2^48 − 1) ≥ m_b·(2^48 + 2^12)),
 * so no limb goes negative. */
#define fe8_sub(r, a, b, c)                                                                              \
    do {                                                                                                 \
        SPN_UNROLL                                                                                       \
        for (int i_ = 0; i_ < 5; i_++)                                                                   \
            (r)->l[i_] = _mm512_sub_epi64(_mm512_add_epi64((a)->l[i_], v1(P_LIMB((c), i_))), (b)->l[i_]); \
        fe8_carry(r);                                                                                    \
    } while (0)

/* r = c·p − a (the negation), carried with m = c: needs m_a < c. */
#define fe8_neg(r, a, c)                                                                  \
    do {                                                                                  \
        SPN_UNROLL                                                                        \
        for (int i_ = 0; i_ < 5; i_++) (r)->l[i_] = _mm512_sub_epi64(v1(P_LIMB((c), i_)), (a)->l[i_]); \
        fe8_carry(r);                                                                     \
    } while (0)

/* r = k·a with m = 1, for carried a and k·m_a < 2^11. */
IFMA_INLINE void fe8_mul_small(fe8 *r, const fe8 *a, uint64_t k) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = _mm512_mullo_epi64(a->l[i], v1(k));
    fe8_normw(r);
}

/* r = a·2^s, carried, for m_a·2^s ≤ 15. */
IFMA_INLINE void fe8_shl(fe8 *r, const fe8 *a, int s) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = _mm512_slli_epi64(a->l[i], (unsigned)s);
    fe8_carry(r);
}

/* Lanes where mask is set take b, the others a. */
IFMA_INLINE void fe8_select(fe8 *r, __mmask8 mask, const fe8 *a, const fe8 *b) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = _mm512_mask_blend_epi64(mask, a->l[i], b->l[i]);
}

/* The unique representative below p, from m = 1 (value < 2^256 + 2^221 < 2p: at most one p off). */
IFMA_INLINE void fe8_canon(fe8 *r, const fe8 *a) {
    fe8 u = *a;
    u.l[0] = _mm512_add_epi64(u.l[0], v1(FE_C)); /* a − p + 2^256 */
    fe8_carry(&u);
    __mmask8 ge_p = _mm512_test_epi64_mask(u.l[4], v1(1ULL << 48)); /* reached 2^256: a ≥ p */
    u.l[4] = _mm512_and_si512(u.l[4], v1(M48));
    fe8_select(r, ge_p, a, &u);
}

/* Lanes whose value (m = 1) is 0 mod p. */
IFMA_INLINE __mmask8 fe8_is_zero(const fe8 *a) {
    fe8 c;
    fe8_canon(&c, a);
    __m512i acc = c.l[0];
    SPN_UNROLL
    for (int i = 1; i < 5; i++) acc = _mm512_or_si512(acc, c.l[i]);
    return _mm512_cmpeq_epi64_mask(acc, _mm512_setzero_si512());
}

/* The head both exponentiations share (the chain libsecp256k1's exponentiations used): returns
 * x2 = a^3 and t = a^((2^223 − 1)·2^23 + 2^22 − 1). */
IFMA_INLINE void fe8_pow_head(fe8 *t, fe8 *x2, const fe8 *a) {
    fe8 x3, x6, x9, x11, x22, x44, x88, x176, x220, x223, u;
    fe8_sqr(&u, a);
    fe8_mul(x2, &u, a);
    fe8_sqr(&u, x2);
    fe8_mul(&x3, &u, a);
    fe8_sqr_n(&u, &x3, 3);
    fe8_mul(&x6, &u, &x3);
    fe8_sqr_n(&u, &x6, 3);
    fe8_mul(&x9, &u, &x3);
    fe8_sqr_n(&u, &x9, 2);
    fe8_mul(&x11, &u, x2);
    fe8_sqr_n(&u, &x11, 11);
    fe8_mul(&x22, &u, &x11);
    fe8_sqr_n(&u, &x22, 22);
    fe8_mul(&x44, &u, &x22);
    fe8_sqr_n(&u, &x44, 44);
    fe8_mul(&x88, &u, &x44);
    fe8_sqr_n(&u, &x88, 88);
    fe8_mul(&x176, &u, &x88);
    fe8_sqr_n(&u, &x176, 44);
    fe8_mul(&x220, &u, &x44);
    fe8_sqr_n(&u, &x220, 3);
    fe8_mul(&x223, &u, &x3);
    fe8_sqr_n(&u, &x223, 23);
    fe8_mul(t, &u, &x22);
}

/* r = a^(p−2) = 1/a (0 for 0): 255 squarings, 15 multiplications. */
IFMA_INLINE void fe8_inv(fe8 *r, const fe8 *a) {
    fe8 t, x2;
    fe8_pow_head(&t, &x2, a);
    fe8_sqr_n(&t, &t, 5);
    fe8_mul(&t, &t, a);
    fe8_sqr_n(&t, &t, 3);
    fe8_mul(&t, &t, &x2);
    fe8_sqr_n(&t, &t, 2);
    fe8_mul(r, &t, a);
}

/* r = a^((p+1)/4): a square root of a when a is a square (the caller checks r² = a). */
IFMA_INLINE void fe8_sqrt(fe8 *r, const fe8 *a) {
    fe8 t, x2;
    fe8_pow_head(&t, &x2, a);
    fe8_sqr_n(&t, &t, 6);
    fe8_mul(&t, &t, &x2);
    fe8_sqr_n(r, &t, 2);
}

/* ---- moving values in and out: lane i's 4 little-endian 64-bit words <-> limbs ---- */

/* Limbs from words w[j][i] (word j of lane i, value < 2^256). */
IFMA_INLINE void fe8_from_words(fe8 *r, const uint64_t w[4][8]) {
    const __m512i m = v1(M52);
    __m512i w0 = _mm512_loadu_si512(w[0]), w1 = _mm512_loadu_si512(w[1]), w2 = _mm512_loadu_si512(w[2]),
            w3 = _mm512_loadu_si512(w[3]);
    r->l[0] = _mm512_and_si512(w0, m);
    r->l[1] = _mm512_and_si512(_mm512_or_si512(_mm512_srli_epi64(w0, 52), _mm512_slli_epi64(w1, 12)), m);
    r->l[2] = _mm512_and_si512(_mm512_or_si512(_mm512_srli_epi64(w1, 40), _mm512_slli_epi64(w2, 24)), m);
    r->l[3] = _mm512_and_si512(_mm512_or_si512(_mm512_srli_epi64(w2, 28), _mm512_slli_epi64(w3, 36)), m);
    r->l[4] = _mm512_srli_epi64(w3, 16);
}

/* Words of a canonical (fully reduced) value. */
IFMA_INLINE void fe8_to_words(uint64_t w[4][8], const fe8 *a) {
    _mm512_storeu_si512(w[0], _mm512_or_si512(a->l[0], _mm512_slli_epi64(a->l[1], 52)));
    _mm512_storeu_si512(w[1], _mm512_or_si512(_mm512_srli_epi64(a->l[1], 12), _mm512_slli_epi64(a->l[2], 40)));
    _mm512_storeu_si512(w[2], _mm512_or_si512(_mm512_srli_epi64(a->l[2], 24), _mm512_slli_epi64(a->l[3], 28)));
    _mm512_storeu_si512(w[3], _mm512_or_si512(_mm512_srli_epi64(a->l[3], 36), _mm512_slli_epi64(a->l[4], 16)));
}

#endif
