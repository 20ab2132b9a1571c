/* Field arithmetic mod p = 2^256 − 0x1000003D1 in radix 2^52, over lane vectors: the fe half of the
 * lane API (core_ec_lanes.h) for the IFMA backend and its portable emulation (core_lanes_ifma.h,
 * core_lanes_c.h), written once over IFMA's operations.
 *
 * Besides the lane API's lv_* operations, the including backend defines
 *   lv_add(a, b), lv_sub(a, b), lv_mullo(a, b)    lane-wise 64-bit +, −, × (low 64 bits)
 *   lv_madd52lo(acc, a, b)   acc + low 52 bits of (a mod 2^52)·(b mod 2^52)   (vpmadd52luq)
 *   lv_madd52hi(acc, a, b)   acc + high 52 bits of (a mod 2^52)·(b mod 2^52)  (vpmadd52huq)
 *
 * An fe holds a value as 5 limbs: value = Σ l[i]·2^(52i). IFMA reads only the low 52 bits of its
 * multiplicands, so every multiplicand must be *carried*: limbs 0..3 below 2^52 and the whole value
 * below 2^260 (then limb 4 < 2^52 too).
 *
 * Magnitude m: a carried value with limb 4 below m·(2^48 + 2^40), so value below m·2^256·(1 + 2^-8).
 *   - mul/sqr/normw output: carried, m = 1 (limb 4 < 2^48 + 2^12).
 *   - add(a, b) + carry: m_a + m_b.   sub(a, b, c) + carry: m_a + c, needs m_b < c.
 *   - mul/sqr take carried inputs with m ≤ 15 (wider than the lane API's 8); mul_small goes through normw.
 * No function branches on or indexes memory by a lane's value. */
#ifndef SPN_CORE_FE52_H
#define SPN_CORE_FE52_H

#include <stdint.h>

/* Field loops run over limbs: fully unrolled, so the limbs stay in registers, and inlined (a backend
 * may define both differently first: the emulation keeps its code small). */
#ifndef SPN_UNROLL
#define SPN_UNROLL _Pragma("GCC unroll 32")
#endif
#ifndef FE52_INLINE
#define FE52_INLINE static inline __attribute__((always_inline)) SPN_EC_FN
#endif

#define SPN_FE_RAW_BITS 52
#define SPN_FE_RAW_LIMBS 5

typedef struct {
    spn_lv l[5];
} fe;

#define M52 0xFFFFFFFFFFFFFULL
#define M48 0xFFFFFFFFFFFFULL
#define FE_C 0x1000003D1ULL  /* 2^256 ≡ C (mod p) */
#define FE_R 0x1000003D10ULL /* 2^260 ≡ 16·C = R */

/* limb i of c·p, for the subtraction constants: p = (2^52 − C, 2^52 − 1, 2^52 − 1, 2^52 − 1, 2^48 − 1) */
#define P_LIMB(c, i) ((uint64_t)(c) * ((i) == 0 ? M52 + 1 - FE_C : (i) == 4 ? M48 : M52))

FE52_INLINE void fe_set1(fe *r, uint64_t small) {
    r->l[0] = lv_set1(small);
    SPN_UNROLL
    for (int i = 1; i < 5; i++) r->l[i] = lv_set1(0);
}

/* Carry limbs 0..3 into the next one; limb 4 keeps the rest. Needs value < 2^260 for a carried result. */
FE52_INLINE void fe52_carry(fe *r) {
    const spn_lv m = lv_set1(M52);
    SPN_UNROLL
    for (int i = 0; i < 4; i++) {
        r->l[i + 1] = lv_add(r->l[i + 1], lv_shr(r->l[i], 52));
        r->l[i] = lv_and(r->l[i], m);
    }
}

/* Weak normalisation of limbs below 2^63: fold limb 4's bits from 2^48 up (2^256 ≡ C) into limb 0
 * (top·C < 2^15·2^33 has no bits from 2^52 up), then carry once. The carry into limb 4 is below
 * 2^12, so the result is carried with limb 4 < 2^48 + 2^12: m = 1. */
FE52_INLINE void fe_normw(fe *r) {
    spn_lv top = lv_shr(r->l[4], 48); /* < 2^15 */
    r->l[4] = lv_and(r->l[4], lv_set1(M48));
    r->l[0] = lv_madd52lo(r->l[0], top, lv_set1(FE_C));
    fe52_carry(r);
}

/* Products of carried a, b in columns t[0..9] (t[k] < 9·2^52), reduced to m = 1. */
FE52_INLINE void fe52_reduce(fe *r, spn_lv t[10]) {
    const spn_lv m = lv_set1(M52), rr = lv_set1(FE_R), zero = lv_set1(0);
    /* Carry the high half: it is below 2^260 (the product is below 2^520), so columns 5..9 become
     * exact 52-bit digits. */
    SPN_UNROLL
    for (int k = 5; k < 9; k++) {
        t[k + 1] = lv_add(t[k + 1], lv_shr(t[k], 52));
        t[k] = lv_and(t[k], m);
    }
    /* 2^260 ≡ R: column 5 + i adds lo(t·R) to limb i and hi(t·R) to limb i + 1; column 9's high part
     * e < 2^37 lands at 2^260 again. */
    SPN_UNROLL
    for (int i = 0; i < 5; i++) {
        t[i] = lv_madd52lo(t[i], t[5 + i], rr);
        if (i < 4) t[i + 1] = lv_madd52hi(t[i + 1], t[5 + i], rr);
    }
    spn_lv e = lv_madd52hi(zero, t[9], rr);
    /* Fold limb 4 from bit 48 up together with e·2^4 (both counted in units of 2^256 ≡ C), then carry
     * once: limbs 0..3 end below 2^52 and limb 4 below 2^48 + 2^5. */
    spn_lv top = lv_add(lv_shr(t[4], 48), lv_shl(e, 4)); /* < 2^42 */
    t[4] = lv_and(t[4], lv_set1(M48));
    t[0] = lv_madd52lo(t[0], top, lv_set1(FE_C));
    t[1] = lv_madd52hi(t[1], top, lv_set1(FE_C));
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = t[i];
    fe52_carry(r);
}

/* r = a·b; a, b carried (m ≤ 15). r may alias a or b. */
FE52_INLINE void fe_mul(fe *r, const fe *a, const fe *b) {
    spn_lv t[10];
    SPN_UNROLL
    for (int k = 0; k < 10; k++) t[k] = lv_set1(0);
    SPN_UNROLL
    for (int i = 0; i < 5; i++)
        SPN_UNROLL
        for (int j = 0; j < 5; j++) {
            t[i + j] = lv_madd52lo(t[i + j], a->l[i], b->l[j]);
            t[i + j + 1] = lv_madd52hi(t[i + j + 1], a->l[i], b->l[j]);
        }
    fe52_reduce(r, t);
}

/* r = a²; a carried (m ≤ 15). Squarings come in long dependent chains (inversion, square root), so
 * the low and high halves go to separate accumulators: shorter chains of dependent IFMAs. */
FE52_INLINE void fe_sqr(fe *r, const fe *a) {
    spn_lv t[10], h[10];
    SPN_UNROLL
    for (int k = 0; k < 10; k++) t[k] = h[k] = lv_set1(0);
    SPN_UNROLL
    for (int i = 0; i < 5; i++)
        SPN_UNROLL
        for (int j = i + 1; j < 5; j++) {
            t[i + j] = lv_madd52lo(t[i + j], a->l[i], a->l[j]);
            h[i + j + 1] = lv_madd52hi(h[i + j + 1], a->l[i], a->l[j]);
        }
    SPN_UNROLL
    for (int k = 1; k < 10; k++) {
        t[k] = lv_add(t[k], h[k]);
        t[k] = lv_add(t[k], t[k]);
    }
    SPN_UNROLL
    for (int i = 0; i < 5; i++) {
        t[2 * i] = lv_madd52lo(t[2 * i], a->l[i], a->l[i]);
        t[2 * i + 1] = lv_madd52hi(t[2 * i + 1], a->l[i], a->l[i]);
    }
    fe52_reduce(r, t);
}

/* r = a + b, m_a + m_b: needs m_a + m_b ≤ 15. */
FE52_INLINE void fe_add(fe *r, const fe *a, const fe *b) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = lv_add(a->l[i], b->l[i]);
    fe52_carry(r);
}

/* r = a + c·p − b, m_a + c: needs m_b < c (c ≥ 2), and m_a + c ≤ 15. Every limb of c·p is at least
 * those of b (limbs 0..3: c·(2^52 − C) ≥ m_b·2^52; limb 4: c·(2^48 − 1) ≥ m_b·(2^48 + 2^40)), so no limb
 * goes negative. */
FE52_INLINE void fe_sub(fe *r, const fe *a, const fe *b, int c) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = lv_sub(lv_add(a->l[i], lv_set1(P_LIMB(c, i))), b->l[i]);
    fe52_carry(r);
}

/* r = c·p − a (the negation), m = c: needs m_a < c. */
FE52_INLINE void fe_neg(fe *r, const fe *a, int c) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = lv_sub(lv_set1(P_LIMB(c, i)), a->l[i]);
    fe52_carry(r);
}

/* r = a/2 mod p, carried, m = (m_a + 1)/2 rounded up (m_a ≤ 14): p is added on the lanes where a
 * is odd, then every limb shifts right by one, taking bit 0 of the next limb as its bit 51 (right for
 * limbs of any width). */
FE52_INLINE void fe_half(fe *r, const fe *a) {
    spn_mask odd = lv_test(a->l[0], lv_set1(1));
    spn_lv t[5];
    SPN_UNROLL
    for (int i = 0; i < 5; i++) t[i] = lv_add(a->l[i], lv_select(odd, lv_set1(0), lv_set1(P_LIMB(1, i))));
    SPN_UNROLL
    for (int i = 0; i < 4; i++) r->l[i] = lv_add(lv_shr(t[i], 1), lv_shl(lv_and(t[i + 1], lv_set1(1)), 51));
    r->l[4] = lv_shr(t[4], 1);
    fe52_carry(r);
}

/* r = k·a with m = 1, for carried a and k·m_a < 2^11. */
FE52_INLINE void fe_mul_small(fe *r, const fe *a, uint64_t k) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = lv_mullo(a->l[i], lv_set1(k));
    fe_normw(r);
}

/* r = a·2^s, carried, for m_a·2^s ≤ 15. */
FE52_INLINE void fe_shl(fe *r, const fe *a, int s) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = lv_shl(a->l[i], (unsigned)s);
    fe52_carry(r);
}

/* Lanes where mask is set take b, the others a. */
FE52_INLINE void fe_select(fe *r, spn_mask mask, const fe *a, const fe *b) {
    SPN_UNROLL
    for (int i = 0; i < 5; i++) r->l[i] = lv_select(mask, a->l[i], b->l[i]);
}

/* The unique representative below p, from m = 1 (value < 2^256 + 2^221 < 2p: at most one p off). */
FE52_INLINE void fe_canon(fe *r, const fe *a) {
    fe u = *a;
    u.l[0] = lv_add(u.l[0], lv_set1(FE_C)); /* a − p + 2^256 */
    fe52_carry(&u);
    spn_mask ge_p = lv_test(u.l[4], lv_set1(1ULL << 48)); /* reached 2^256: a ≥ p */
    u.l[4] = lv_and(u.l[4], lv_set1(M48));
    fe_select(r, ge_p, a, &u);
}

/* Lanes whose value (m = 1) is 0 mod p. */
FE52_INLINE spn_mask fe_is_zero(const fe *a) {
    fe c;
    fe_canon(&c, a);
    spn_lv acc = c.l[0];
    SPN_UNROLL
    for (int i = 1; i < 5; i++) acc = lv_or(acc, c.l[i]);
    return lv_eq(acc, lv_set1(0));
}

/* Lanes whose canonical value is odd. */
FE52_INLINE spn_mask fe_is_odd(const fe *a) { return lv_test(a->l[0], lv_set1(1)); }

/* Limbs from four lane vectors of 64-bit words (value < 2^256). */
FE52_INLINE void fe_from_lv(fe *r, const spn_lv w[4]) {
    const spn_lv m = lv_set1(M52);
    r->l[0] = lv_and(w[0], m);
    r->l[1] = lv_and(lv_or(lv_shr(w[0], 52), lv_shl(w[1], 12)), m);
    r->l[2] = lv_and(lv_or(lv_shr(w[1], 40), lv_shl(w[2], 24)), m);
    r->l[3] = lv_and(lv_or(lv_shr(w[2], 28), lv_shl(w[3], 36)), m);
    r->l[4] = lv_shr(w[3], 16);
}

FE52_INLINE void fe_from_words(fe *r, const uint64_t w[4][SPN_LANES]) {
    spn_lv v[4];
    SPN_UNROLL
    for (int j = 0; j < 4; j++) v[j] = lv_load(w[j]);
    fe_from_lv(r, v);
}

/* Words of a canonical (fully reduced) value. */
FE52_INLINE void fe_to_words(uint64_t w[4][SPN_LANES], const fe *a) {
    lv_store(w[0], lv_or(a->l[0], lv_shl(a->l[1], 52)));
    lv_store(w[1], lv_or(lv_shr(a->l[1], 12), lv_shl(a->l[2], 40)));
    lv_store(w[2], lv_or(lv_shr(a->l[2], 24), lv_shl(a->l[3], 28)));
    lv_store(w[3], lv_or(lv_shr(a->l[3], 36), lv_shl(a->l[4], 16)));
}

FE52_INLINE void fe_from_raw(fe *r, const uint64_t raw[5][SPN_LANES]) {
    SPN_UNROLL
    for (int j = 0; j < 5; j++) r->l[j] = lv_load(raw[j]);
}

#endif
