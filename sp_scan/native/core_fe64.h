/* Field arithmetic mod p = 2^256 − C, C = 0x1000003D1, on four 64-bit words: the fe half of the lane
 * API (core_ec_lanes.h) for the scalar engine (core_lanes_c.h without emulation), each lane on its own.
 *
 * An fe holds any value below 2^256 (at most one p above its canonical form): every function returns
 * one, so every magnitude of the lane API is 1 and the c of fe_sub and fe_neg is not needed. Sums,
 * differences and products fold what passes 2^256 back in as C (2^256 ≡ C), in carry chains of ADC
 * and SBB (x86-64's baseline instructions through their intrinsics; plain 128-bit arithmetic
 * elsewhere). Against radix 2^52 this takes 16 word products for a multiplication instead of 25,
 * and 10 for a squaring instead of 15, at the cost of a carry chain in every addition.
 * No function branches on or indexes memory by a value. */
#ifndef SPN_CORE_FE64_H
#define SPN_CORE_FE64_H

#include <stdint.h>

#ifndef FE64_INLINE
#define FE64_INLINE static inline __attribute__((always_inline)) SPN_EC_FN
#endif

#define SPN_FE_RAW_BITS 64
#define SPN_FE_RAW_LIMBS 4
#define FE_C 0x1000003D1ULL /* 2^256 ≡ C (mod p) */
/* Word loops are unrolled, so the words stay in registers. */
#define FE64_UNROLL _Pragma("GCC unroll 8")

typedef struct {
    spn_lv l[4];
} fe;

static const uint64_t FE64_P[4] = {0xFFFFFFFEFFFFFC2FULL, ~0ULL, ~0ULL, ~0ULL};

#if defined(__x86_64__)
#include <immintrin.h>
typedef unsigned char fe64_carry;
#define fe64_adc(c, a, b, out) _addcarry_u64((c), (a), (b), (unsigned long long *)(out))
#define fe64_sbb(c, a, b, out) _subborrow_u64((c), (a), (b), (unsigned long long *)(out))
#else
typedef uint64_t fe64_carry;
/* *out = a + b + c (c ≤ 1); returns the carry. */
FE64_INLINE fe64_carry fe64_adc(fe64_carry c, uint64_t a, uint64_t b, uint64_t *out) {
    spn_u128 s = (spn_u128)a + b + c;
    *out = (uint64_t)s;
    return (fe64_carry)(s >> 64);
}
/* *out = a − b − c (c ≤ 1); returns the borrow. */
FE64_INLINE fe64_carry fe64_sbb(fe64_carry c, uint64_t a, uint64_t b, uint64_t *out) {
    spn_u128 d = (spn_u128)a - b - c;
    *out = (uint64_t)d;
    return (fe64_carry)(d >> 64) & 1;
}
#endif

/* r = a + k for a 4-word a and k < 2^64; returns the carry out of 2^256. */
FE64_INLINE fe64_carry fe64_add_word(uint64_t r[4], const uint64_t a[4], uint64_t k) {
    fe64_carry c = fe64_adc(0, a[0], k, &r[0]);
    c = fe64_adc(c, a[1], 0, &r[1]);
    c = fe64_adc(c, a[2], 0, &r[2]);
    return fe64_adc(c, a[3], 0, &r[3]);
}

/* r = a + hi·2^256 reduced below 2^256, for hi < 2^64: hi·C is added, and C once more if that
 * passes 2^256. Then the sum wrapped to below hi·C < 2^97, so words 2 and 3 are 0 and word 1 is below
 * 2^33: the second C carries at most into word 1. */
FE64_INLINE void fe64_fold(uint64_t r[4], const uint64_t a[4], uint64_t hi) {
    spn_u128 m = (spn_u128)hi * FE_C;
    uint64_t t[4];
    fe64_carry c = fe64_adc(0, a[0], (uint64_t)m, &t[0]);
    c = fe64_adc(c, a[1], (uint64_t)(m >> 64), &t[1]);
    c = fe64_adc(c, a[2], 0, &r[2]);
    c = fe64_adc(c, a[3], 0, &r[3]);
    c = fe64_adc(0, t[0], lv_word_of_bit(c) & FE_C, &r[0]);
    r[1] = t[1] + c;
}

/* r = t[0..7] (a 512-bit product) mod p, below 2^256. */
FE64_INLINE void fe64_reduce(uint64_t r[4], const uint64_t t[8]) {
    uint64_t lo[4], hi[4], o[4], top;
    fe64_carry c;
    FE64_UNROLL
    for (int j = 0; j < 4; j++) {
        spn_u128 p = (spn_u128)t[4 + j] * FE_C;
        lo[j] = (uint64_t)p;
        hi[j] = (uint64_t)(p >> 64);
    }
    c = fe64_adc(0, t[0], lo[0], &o[0]);
    c = fe64_adc(c, t[1], lo[1], &o[1]);
    c = fe64_adc(c, t[2], lo[2], &o[2]);
    c = fe64_adc(c, t[3], lo[3], &o[3]);
    fe64_adc(c, hi[3], 0, &top);
    c = fe64_adc(0, o[1], hi[0], &o[1]);
    c = fe64_adc(c, o[2], hi[1], &o[2]);
    c = fe64_adc(c, o[3], hi[2], &o[3]);
    fe64_adc(c, top, 0, &top); /* below 2^34 */
    fe64_fold(r, o, top);
}

/* t[i..i+4] += x·y[0..3], t[i+4] written fresh (the rows before reached t[i+3] only). */
FE64_INLINE void fe64_row(uint64_t t[8], int i, uint64_t x, const uint64_t y[4]) {
    uint64_t lo[4], hi[4];
    fe64_carry c;
    FE64_UNROLL
    for (int j = 0; j < 4; j++) {
        spn_u128 p = (spn_u128)x * y[j];
        lo[j] = (uint64_t)p;
        hi[j] = (uint64_t)(p >> 64);
    }
    c = fe64_adc(0, t[i], lo[0], &t[i]);
    c = fe64_adc(c, t[i + 1], lo[1], &t[i + 1]);
    c = fe64_adc(c, t[i + 2], lo[2], &t[i + 2]);
    c = fe64_adc(c, t[i + 3], lo[3], &t[i + 3]);
    fe64_adc(c, hi[3], 0, &t[i + 4]); /* hi[3] ≤ 2^64 − 2: no carry out */
    c = fe64_adc(0, t[i + 1], hi[0], &t[i + 1]);
    c = fe64_adc(c, t[i + 2], hi[1], &t[i + 2]);
    c = fe64_adc(c, t[i + 3], hi[2], &t[i + 3]);
    fe64_adc(c, t[i + 4], 0, &t[i + 4]); /* the partial product fits in words 0..i+4 */
}

/* Lane q_ of a, b as word arrays x, y; the result's words w go to lane q_ of r. */
#define FE64_IN(x, a) uint64_t x[4] = {(a)->l[0].v[q_], (a)->l[1].v[q_], (a)->l[2].v[q_], (a)->l[3].v[q_]}
#define FE64_OUT(r, w) FE64_UNROLL for (int i_ = 0; i_ < 4; i_++) (r)->l[i_].v[q_] = (w)[i_]

FE64_INLINE void fe64_mul(uint64_t r[4], const uint64_t a[4], const uint64_t b[4]) {
    uint64_t t[8] = {0};
    FE64_UNROLL
    for (int i = 0; i < 4; i++) fe64_row(t, i, a[i], b);
    fe64_reduce(r, t);
}

/* r = x²: the six cross products once, doubled, then the four squares. */
FE64_INLINE void fe64_sqr(uint64_t r[4], const uint64_t x[4]) {
    uint64_t t[8], lo, hi;
    spn_u128 p;
    fe64_carry c;
    /* row 0: x0·(x1, x2, x3) at words 1..4 */
    p = (spn_u128)x[0] * x[1];
    t[1] = (uint64_t)p;
    hi = (uint64_t)(p >> 64);
    p = (spn_u128)x[0] * x[2] + hi;
    t[2] = (uint64_t)p;
    hi = (uint64_t)(p >> 64);
    p = (spn_u128)x[0] * x[3] + hi;
    t[3] = (uint64_t)p;
    t[4] = (uint64_t)(p >> 64);
    /* row 1: x1·(x2, x3) at words 3..5 */
    p = (spn_u128)x[1] * x[2] + t[3];
    t[3] = (uint64_t)p;
    hi = (uint64_t)(p >> 64);
    p = (spn_u128)x[1] * x[3] + t[4] + hi;
    t[4] = (uint64_t)p;
    t[5] = (uint64_t)(p >> 64);
    /* row 2: x2·x3 at words 5..6 */
    p = (spn_u128)x[2] * x[3] + t[5];
    t[5] = (uint64_t)p;
    t[6] = (uint64_t)(p >> 64);
    /* doubled */
    t[7] = t[6] >> 63;
    t[6] = (t[6] << 1) | (t[5] >> 63);
    t[5] = (t[5] << 1) | (t[4] >> 63);
    t[4] = (t[4] << 1) | (t[3] >> 63);
    t[3] = (t[3] << 1) | (t[2] >> 63);
    t[2] = (t[2] << 1) | (t[1] >> 63);
    t[1] <<= 1;
    /* the squares at words 2i, 2i + 1 */
    p = (spn_u128)x[0] * x[0];
    t[0] = (uint64_t)p;
    c = fe64_adc(0, t[1], (uint64_t)(p >> 64), &t[1]);
    FE64_UNROLL
    for (int i = 1; i < 4; i++) {
        p = (spn_u128)x[i] * x[i];
        lo = (uint64_t)p;
        hi = (uint64_t)(p >> 64);
        c = fe64_adc(c, t[2 * i], lo, &t[2 * i]);
        c = fe64_adc(c, t[2 * i + 1], hi, &t[2 * i + 1]);
    }
    fe64_reduce(r, t);
}

/* r = a + b: a carry out of 2^256 comes back as C; if that carries again, the sum wrapped to below C
 * and C is added to word 0 alone. */
FE64_INLINE void fe64_add(uint64_t r[4], const uint64_t a[4], const uint64_t b[4]) {
    uint64_t s[4];
    fe64_carry c = 0;
    FE64_UNROLL
    for (int i = 0; i < 4; i++) c = fe64_adc(c, a[i], b[i], &s[i]);
    c = fe64_add_word(r, s, lv_word_of_bit(c) & FE_C);
    r[0] += lv_word_of_bit(c) & FE_C;
}

/* r = a − b: a borrow means 2^256 was added, so C comes off (2^256 − C = p); if that borrows again,
 * the difference was below C, word 0 is now above 2^64 − 2^33, and C comes off word 0 alone. */
FE64_INLINE void fe64_sub(uint64_t r[4], const uint64_t a[4], const uint64_t b[4]) {
    uint64_t d[4], k;
    fe64_carry c = 0;
    FE64_UNROLL
    for (int i = 0; i < 4; i++) c = fe64_sbb(c, a[i], b[i], &d[i]);
    k = lv_word_of_bit(c) & FE_C;
    c = 0;
    FE64_UNROLL
    for (int i = 0; i < 4; i++) c = fe64_sbb(c, d[i], i == 0 ? k : 0, &r[i]);
    r[0] -= lv_word_of_bit(c) & FE_C;
}

/* r = a/2: p is added where a is odd (a 257-bit sum), then the words shift right by one. */
FE64_INLINE void fe64_half(uint64_t r[4], const uint64_t a[4]) {
    uint64_t m = lv_word_of_bit(a[0] & 1), t[4];
    fe64_carry c = fe64_adc(0, a[0], FE64_P[0] & m, &t[0]);
    c = fe64_adc(c, a[1], FE64_P[1] & m, &t[1]);
    c = fe64_adc(c, a[2], FE64_P[2] & m, &t[2]);
    c = fe64_adc(c, a[3], FE64_P[3] & m, &t[3]);
    r[0] = (t[0] >> 1) | (t[1] << 63);
    r[1] = (t[1] >> 1) | (t[2] << 63);
    r[2] = (t[2] >> 1) | (t[3] << 63);
    r[3] = (t[3] >> 1) | ((uint64_t)c << 63);
}

/* r = k·a for k < 2^32. */
FE64_INLINE void fe64_mul_small(uint64_t r[4], const uint64_t a[4], uint64_t k) {
    uint64_t t[4];
    spn_u128 p = 0;
    FE64_UNROLL
    for (int j = 0; j < 4; j++) {
        p = (spn_u128)a[j] * k + (uint64_t)(p >> 64);
        t[j] = (uint64_t)p;
    }
    fe64_fold(r, t, (uint64_t)(p >> 64));
}

/* r = −a. */
FE64_INLINE void fe64_neg(uint64_t r[4], const uint64_t a[4]) {
    static const uint64_t zero[4] = {0};
    fe64_sub(r, zero, a);
}

/* ---- the lane API: each lane's words through the functions above ---- */

#define FE64_LANEWISE2(name, op)                                 \
    FE64_INLINE void name(fe *r, const fe *a, const fe *b) {     \
        LV_EACH {                                                \
            FE64_IN(x, a);                                       \
            FE64_IN(y, b);                                       \
            op(x, x, y);                                         \
            FE64_OUT(r, x);                                      \
        }                                                        \
    }
#define FE64_LANEWISE1(name, op)                                 \
    FE64_INLINE void name(fe *r, const fe *a) {                  \
        LV_EACH {                                                \
            FE64_IN(x, a);                                       \
            op(x, x);                                            \
            FE64_OUT(r, x);                                      \
        }                                                        \
    }
FE64_LANEWISE2(fe_mul, fe64_mul) /* r may alias a or b, here and below */
FE64_LANEWISE1(fe_sqr, fe64_sqr)
FE64_LANEWISE2(fe_add, fe64_add)
FE64_LANEWISE2(fe64_sub_lanes, fe64_sub)
FE64_LANEWISE1(fe64_neg_lanes, fe64_neg)
FE64_LANEWISE1(fe_half, fe64_half)
#undef FE64_LANEWISE1
#undef FE64_LANEWISE2

FE64_INLINE void fe_sub(fe *r, const fe *a, const fe *b, int c) {
    (void)c;
    fe64_sub_lanes(r, a, b);
}

FE64_INLINE void fe_neg(fe *r, const fe *a, int c) {
    (void)c;
    fe64_neg_lanes(r, a);
}

/* r = k·a for k < 2^32. */
FE64_INLINE void fe_mul_small(fe *r, const fe *a, uint64_t k) {
    LV_EACH {
        FE64_IN(x, a);
        fe64_mul_small(x, x, k);
        FE64_OUT(r, x);
    }
}

/* r = a·2^s for s < 32. */
FE64_INLINE void fe_shl(fe *r, const fe *a, int s) { fe_mul_small(r, a, 1ULL << s); }

/* Every value is already below 2^256. */
FE64_INLINE void fe_normw(fe *r) { (void)r; }

FE64_INLINE void fe_set1(fe *r, uint64_t small) {
    r->l[0] = lv_set1(small);
    FE64_UNROLL
    for (int i = 1; i < 4; i++) r->l[i] = lv_set1(0);
}

/* Lanes where mask is set take b, the others a. */
FE64_INLINE void fe_select(fe *r, spn_mask mask, const fe *a, const fe *b) {
    FE64_UNROLL
    for (int i = 0; i < 4; i++) r->l[i] = lv_select(mask, a->l[i], b->l[i]);
}

/* The unique representative below p: a + C passes 2^256 exactly when a ≥ p, and is then a − p. */
FE64_INLINE void fe_canon(fe *r, const fe *a) {
    fe u;
    spn_mask ge_p = 0;
    LV_EACH {
        FE64_IN(x, a);
        ge_p |= (spn_mask)fe64_add_word(x, x, FE_C) << q_;
        FE64_OUT(&u, x);
    }
    fe_select(r, ge_p, a, &u);
}

FE64_INLINE spn_mask fe_is_zero(const fe *a) {
    fe c;
    fe_canon(&c, a);
    return lv_eq(lv_or(lv_or(c.l[0], c.l[1]), lv_or(c.l[2], c.l[3])), lv_set1(0));
}

FE64_INLINE spn_mask fe_is_odd(const fe *a) { return lv_test(a->l[0], lv_set1(1)); }

FE64_INLINE void fe_from_lv(fe *r, const spn_lv w[4]) {
    FE64_UNROLL
    for (int i = 0; i < 4; i++) r->l[i] = w[i];
}

FE64_INLINE void fe_from_words(fe *r, const uint64_t w[4][SPN_LANES]) {
    FE64_UNROLL
    for (int i = 0; i < 4; i++) r->l[i] = lv_load(w[i]);
}

FE64_INLINE void fe_to_words(uint64_t w[4][SPN_LANES], const fe *a) {
    FE64_UNROLL
    for (int i = 0; i < 4; i++) lv_store(w[i], a->l[i]);
}

FE64_INLINE void fe_from_raw(fe *r, const uint64_t raw[4][SPN_LANES]) { fe_from_words(r, raw); }

#endif
