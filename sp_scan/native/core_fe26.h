/* Field arithmetic mod p = 2^256 − 0x1000003D1 in radix 2^26, over lane vectors: the fe half of the
 * lane API (core_ec_lanes.h) for the AVX2 backend and its portable emulation (core_lanes_avx2.h,
 * core_lanes_c.h), written once over AVX2's operations.
 *
 * Besides the lane API's lv_* operations, the including backend defines
 *   lv_add(a, b), lv_sub(a, b)   lane-wise 64-bit +, −
 *   lv_mul32(a, b)               (a mod 2^32)·(b mod 2^32), the full 64-bit product (vpmuludq)
 *
 * An fe holds a value as 10 limbs: value = Σ l[i]·2^(26i). A multiplicand limb must be below 2^32
 * (vpmuludq reads the low half of each lane); with 26-bit digits a column of products keeps enough
 * headroom that additions never carry.
 *
 * Magnitude m: limbs 0..8 at most m·(2^26 + 2^14) and limb 9 at most m·(2^22 + 2^10), so value below
 * m·2^256·(1 + 2^-12).
 *   - mul/sqr/normw output: m = 1 (limbs 0, 1 below 2^26, limb 9 below 2^22: value < 2^256 + 2^223 < 2p).
 *   - add(a, b): m_a + m_b, limb by limb, no carry.   sub(a, b, c): m_a + c, needs m_b < c ≤ 15.
 *   - mul/sqr take m ≤ 15 (wider than the lane API's 8), or any limbs below 2^26 (the field tests'
 *     raw values below 2^260): limbs below 2^30 and a product below 2^520.
 *   - mul_small(a, k) needs k·m_a ≤ 2^10 and goes through normw (limbs below 2^54 -> m = 1).
 * No function branches on or indexes memory by a lane's value. */
#ifndef SPN_CORE_FE26_H
#define SPN_CORE_FE26_H

#include <stdint.h>

/* Field loops run over limbs: fully unrolled, so the limbs stay in registers (a backend may say otherwise). */
#ifndef SPN_UNROLL
#define SPN_UNROLL _Pragma("GCC unroll 32")
#endif
#ifndef FE26_INLINE
#define FE26_INLINE static inline __attribute__((always_inline)) SPN_EC_FN
#endif
/* The backend may keep fe_mul and fe_sqr out of line (the AVX2 one does: inlined into the group
 * law, GCC interleaves neighbouring multiplications and spills most of their columns). */
#ifndef FE26_MUL_FN
#define FE26_MUL_FN FE26_INLINE
#endif

#define SPN_FE_RAW_BITS 26
#define SPN_FE_RAW_LIMBS 10

typedef struct {
    spn_lv l[10];
} fe;

#define M26 0x3FFFFFFULL
#define M22 0x3FFFFFULL
#define FE26_C0 0x3D1ULL      /* 2^256 ≡ C = 0x3D1 + 2^6·2^26 (mod p) */
#define FE26_R0 0x3D10ULL     /* 2^260 ≡ 0x3D10 + 2^10·2^26 */
#define FE26_R270 0xF44000ULL /* 2^270 ≡ 0xF44000 + 2^20·2^26 */

/* limb i of c·p, for the subtraction constants: p = (2^26 − 0x3D1, 2^26 − 0x41, 2^26 − 1 (×7), 2^22 − 1).
 * For m_b < c ≤ 15 each is at least m_b times the magnitude bound of its limb. */
#define P26_LIMB(c, i) ((uint64_t)(c) * ((i) == 0 ? M26 + 1 - FE26_C0 : (i) == 1 ? M26 - 0x40 : (i) == 9 ? M22 : M26))

FE26_INLINE void fe_set1(fe *r, uint64_t small) {
    r->l[0] = lv_set1(small);
    SPN_UNROLL
    for (int i = 1; i < 10; i++) r->l[i] = lv_set1(0);
}

/* Carry limbs 0..8 into the next one (each ends below 2^26); limb 9 keeps the rest. */
FE26_INLINE void fe26_carry(spn_lv t[10]) {
    const spn_lv m = lv_set1(M26);
    SPN_UNROLL
    for (int i = 0; i < 9; i++) {
        t[i + 1] = lv_add(t[i + 1], lv_shr(t[i], 26));
        t[i] = lv_and(t[i], m);
    }
}

/* Limbs below 2^63 with limb 9 below 2^54 (after the carry) to m = 1: carry, fold limb 9 from bit 22
 * up (top < 2^32, 2^256 ≡ C) into limbs 0 and 1, and carry those two once more: limb 2 gains at most
 * 2^13. */
FE26_INLINE void fe26_carry_fold(fe *r, spn_lv t[10]) {
    const spn_lv m = lv_set1(M26);
    fe26_carry(t);
    spn_lv top = lv_shr(t[9], 22);
    t[9] = lv_and(t[9], lv_set1(M22));
    t[0] = lv_add(t[0], lv_mul32(top, lv_set1(FE26_C0)));
    t[1] = lv_add(t[1], lv_shl(top, 6));
    t[1] = lv_add(t[1], lv_shr(t[0], 26));
    t[0] = lv_and(t[0], m);
    t[2] = lv_add(t[2], lv_shr(t[1], 26));
    t[1] = lv_and(t[1], m);
    SPN_UNROLL
    for (int i = 0; i < 10; i++) r->l[i] = t[i];
}

/* Weak normalisation (limbs below 2^54): m = 1. */
FE26_INLINE void fe_normw(fe *r) { fe26_carry_fold(r, r->l); }

/* Column k of a product: Σ x_i·y_(k−i) over the limbs; x, y are limb arrays. */
#define FE26_COL(acc, x, y, k)                                                      \
    do {                                                                            \
        const int lo_ = (k) < 10 ? 0 : (k) - 9, hi_ = (k) < 10 ? (k) : 9;          \
        acc = lv_mul32((x)[lo_], (y)[(k) - lo_]);                                   \
        SPN_UNROLL                                                                  \
        for (int i_ = lo_ + 1; i_ <= hi_; i_++) acc = lv_add(acc, lv_mul32((x)[i_], (y)[(k) - i_])); \
    } while (0)
/* Column k of a square from the limbs x and their doubles x2. */
#define FE26_SQCOL(acc, x, x2, k)                                                   \
    do {                                                                            \
        acc = ((k) & 1) ? lv_set1(0) : lv_mul32((x)[(k) / 2], (x)[(k) / 2]);        \
        SPN_UNROLL                                                                  \
        for (int i_ = (k) < 10 ? 0 : (k) - 9; 2 * i_ < (k); i_++) acc = lv_add(acc, lv_mul32((x2)[i_], (x)[(k) - i_])); \
    } while (0)

/* The product's columns, each below 2^63.4, taken one low and one high at a time (column i with
 * column 10 + i) and reduced as they come, so few of them are live at once: d carries the high
 * columns, whose 26-bit digits u come back at 2^(26i) (2^260 ≡ 0x3D10 + 2^10·2^26), c the low ones.
 * COL(acc, k) computes column k. Out: m = 1. */
#define FE26_REDUCE_COLUMNS(r, COL)                                                 \
    do {                                                                            \
        const spn_lv m_ = lv_set1(M26), r0_ = lv_set1(FE26_R0);                     \
        spn_lv c_, d_, u_, p_, t_[10];                                              \
        COL(d_, 9);                                                                 \
        t_[9] = lv_and(d_, m_);                                                     \
        d_ = lv_shr(d_, 26);                                                        \
        c_ = lv_set1(0);                                                            \
        SPN_UNROLL                                                                  \
        for (int i = 0; i < 9; i++) {                                               \
            COL(p_, i);                                                             \
            c_ = lv_add(c_, p_);                                                    \
            COL(p_, 10 + i);                                                        \
            d_ = lv_add(d_, p_);                                                    \
            u_ = lv_and(d_, m_);                                                    \
            d_ = lv_shr(d_, 26);                                                    \
            c_ = lv_add(c_, lv_mul32(u_, r0_));                                     \
            t_[i] = lv_and(c_, m_);                                                 \
            c_ = lv_add(lv_shr(c_, 26), lv_shl(u_, 10));                            \
        }                                                                           \
        /* c_ is at 2^234 now and d_ (< 2^26: the product is below 2^520) at 2^494 =          \
         * 2^260·2^234 ≡ 0x3D10·2^234 + 2^270, with 2^270 ≡ 0xF44000 + 2^20·2^26. */           \
        c_ = lv_add(lv_add(c_, t_[9]), lv_mul32(d_, r0_));                          \
        t_[0] = lv_add(t_[0], lv_mul32(d_, lv_set1(FE26_R270)));                    \
        t_[1] = lv_add(t_[1], lv_shl(d_, 20));                                      \
        /* Limb 9 from bit 22 up (c_ < 2^41: top < 2^19) is a multiple of 2^256 ≡ C. */         \
        u_ = lv_shr(c_, 22);                                                        \
        t_[9] = lv_and(c_, lv_set1(M22));                                           \
        t_[0] = lv_add(t_[0], lv_mul32(u_, lv_set1(FE26_C0)));                      \
        t_[1] = lv_add(t_[1], lv_shl(u_, 6));                                       \
        SPN_UNROLL                                                                  \
        for (int i = 0; i < 3; i++) {                                               \
            t_[i + 1] = lv_add(t_[i + 1], lv_shr(t_[i], 26));                       \
            t_[i] = lv_and(t_[i], m_);                                              \
        }                                                                           \
        SPN_UNROLL                                                                  \
        for (int i = 0; i < 10; i++) (r)->l[i] = t_[i];                             \
    } while (0)

/* r = a·b (see the bounds above). r may alias a or b. */
FE26_MUL_FN void fe_mul(fe *r, const fe *a, const fe *b) {
#define FE26_MUL_COL(acc, k) FE26_COL(acc, a->l, b->l, k)
    FE26_REDUCE_COLUMNS(r, FE26_MUL_COL);
#undef FE26_MUL_COL
}

/* r = a² (the bounds of fe_mul: doubled limbs stay below 2^31). */
FE26_MUL_FN void fe_sqr(fe *r, const fe *a) {
    spn_lv d[10];
    SPN_UNROLL
    for (int i = 0; i < 10; i++) d[i] = lv_add(a->l[i], a->l[i]);
#define FE26_SQR_COL(acc, k) FE26_SQCOL(acc, a->l, d, k)
    FE26_REDUCE_COLUMNS(r, FE26_SQR_COL);
#undef FE26_SQR_COL
}

/* r = a + b: m_a + m_b. */
FE26_INLINE void fe_add(fe *r, const fe *a, const fe *b) {
    SPN_UNROLL
    for (int i = 0; i < 10; i++) r->l[i] = lv_add(a->l[i], b->l[i]);
}

/* r = a + c·p − b: m_a + c, needs m_b < c ≤ 15 (no limb goes negative). */
FE26_INLINE void fe_sub(fe *r, const fe *a, const fe *b, int c) {
    SPN_UNROLL
    for (int i = 0; i < 10; i++) r->l[i] = lv_sub(lv_add(a->l[i], lv_set1(P26_LIMB(c, i))), b->l[i]);
}

/* r = c·p − a: m = c, needs m_a < c ≤ 15. */
FE26_INLINE void fe_neg(fe *r, const fe *a, int c) {
    SPN_UNROLL
    for (int i = 0; i < 10; i++) r->l[i] = lv_sub(lv_set1(P26_LIMB(c, i)), a->l[i]);
}

/* r = a/2 mod p, m = (m_a + 1)/2 rounded up (m_a ≤ 14): p is added on the lanes where a is odd (a's
 * parity is limb 0's), then every limb shifts right by one, taking bit 0 of the next limb as its bit
 * 25, and limbs 0..8 are carried. */
FE26_INLINE void fe_half(fe *r, const fe *a) {
    spn_mask odd = lv_test(a->l[0], lv_set1(1));
    spn_lv t[10];
    SPN_UNROLL
    for (int i = 0; i < 10; i++) t[i] = lv_add(a->l[i], lv_select(odd, lv_set1(0), lv_set1(P26_LIMB(1, i))));
    SPN_UNROLL
    for (int i = 0; i < 9; i++) r->l[i] = lv_add(lv_shr(t[i], 1), lv_shl(lv_and(t[i + 1], lv_set1(1)), 25));
    r->l[9] = lv_shr(t[9], 1);
    fe26_carry(r->l);
}

/* r = k·a with m = 1, for k·m_a ≤ 2^10. */
FE26_INLINE void fe_mul_small(fe *r, const fe *a, uint64_t k) {
    SPN_UNROLL
    for (int i = 0; i < 10; i++) r->l[i] = lv_mul32(a->l[i], lv_set1(k));
    fe_normw(r);
}

/* r = a·2^s: m_a·2^s (≤ 15). */
FE26_INLINE void fe_shl(fe *r, const fe *a, int s) {
    SPN_UNROLL
    for (int i = 0; i < 10; i++) r->l[i] = lv_shl(a->l[i], (unsigned)s);
}

/* Lanes where mask is set take b, the others a. */
FE26_INLINE void fe_select(fe *r, spn_mask mask, const fe *a, const fe *b) {
    SPN_UNROLL
    for (int i = 0; i < 10; i++) r->l[i] = lv_select(mask, a->l[i], b->l[i]);
}

/* The unique representative below p, from m = 1 (value < 2p: at most one p off). After the carry,
 * limbs 0..8 are below 2^26 and limb 9 at most 2^22; adding C reaches 2^256 (bit 22 of limb 9)
 * exactly when the value is at least p, and then the sum less 2^256 is the value less p. */
FE26_INLINE void fe_canon(fe *r, const fe *a) {
    fe x = *a, u;
    fe26_carry(x.l);
    u = x;
    u.l[0] = lv_add(u.l[0], lv_set1(FE26_C0));
    u.l[1] = lv_add(u.l[1], lv_set1(0x40));
    fe26_carry(u.l);
    spn_mask ge_p = lv_test(u.l[9], lv_set1(1ULL << 22));
    u.l[9] = lv_and(u.l[9], lv_set1(M22));
    fe_select(r, ge_p, &x, &u);
}

/* Lanes whose value (m = 1) is 0 mod p. */
FE26_INLINE spn_mask fe_is_zero(const fe *a) {
    fe c;
    fe_canon(&c, a);
    spn_lv acc = c.l[0];
    SPN_UNROLL
    for (int i = 1; i < 10; i++) acc = lv_or(acc, c.l[i]);
    return lv_eq(acc, lv_set1(0));
}

/* Lanes whose canonical value is odd. */
FE26_INLINE spn_mask fe_is_odd(const fe *a) { return lv_test(a->l[0], lv_set1(1)); }

/* Limbs from four lane vectors of 64-bit words (value < 2^256): m = 1. */
FE26_INLINE void fe_from_lv(fe *r, const spn_lv w[4]) {
    const spn_lv m = lv_set1(M26);
    r->l[0] = lv_and(w[0], m);
    r->l[1] = lv_and(lv_shr(w[0], 26), m);
    r->l[2] = lv_and(lv_or(lv_shr(w[0], 52), lv_shl(w[1], 12)), m);
    r->l[3] = lv_and(lv_shr(w[1], 14), m);
    r->l[4] = lv_and(lv_or(lv_shr(w[1], 40), lv_shl(w[2], 24)), m);
    r->l[5] = lv_and(lv_shr(w[2], 2), m);
    r->l[6] = lv_and(lv_shr(w[2], 28), m);
    r->l[7] = lv_and(lv_or(lv_shr(w[2], 54), lv_shl(w[3], 10)), m);
    r->l[8] = lv_and(lv_shr(w[3], 16), m);
    r->l[9] = lv_shr(w[3], 42);
}

FE26_INLINE void fe_from_words(fe *r, const uint64_t w[4][SPN_LANES]) {
    spn_lv v[4];
    SPN_UNROLL
    for (int j = 0; j < 4; j++) v[j] = lv_load(w[j]);
    fe_from_lv(r, v);
}

/* Words of a canonical value (limbs below 2^26, limb 9 below 2^22). */
FE26_INLINE void fe_to_words(uint64_t w[4][SPN_LANES], const fe *a) {
    const spn_lv *l = a->l;
    lv_store(w[0], lv_or(lv_or(l[0], lv_shl(l[1], 26)), lv_shl(l[2], 52)));
    lv_store(w[1], lv_or(lv_or(lv_shr(l[2], 12), lv_shl(l[3], 14)), lv_shl(l[4], 40)));
    lv_store(w[2], lv_or(lv_or(lv_shr(l[4], 24), lv_shl(l[5], 2)), lv_or(lv_shl(l[6], 28), lv_shl(l[7], 54))));
    lv_store(w[3], lv_or(lv_or(lv_shr(l[7], 10), lv_shl(l[8], 16)), lv_shl(l[9], 42)));
}

FE26_INLINE void fe_from_raw(fe *r, const uint64_t raw[10][SPN_LANES]) {
    SPN_UNROLL
    for (int j = 0; j < 10; j++) r->l[j] = lv_load(raw[j]);
}

#endif
