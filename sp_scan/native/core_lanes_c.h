/* The portable lane backend (core_ec_lanes.h): plain C11 over arrays of SPN_LANES 64-bit lanes, no
 * intrinsics (any 64-bit target with unsigned __int128: x86-64, aarch64, ...). The field is
 * core_fe52.h's radix 2^52 on IFMA's two operations, emulated exactly: the low or high 52 bits of the
 * product of two operands' low 52 bits.
 *
 * The including file defines SPN_LANES first, and either
 *   - SPN_EMULATE_IFMA: the IFMA engine's schedule (8 lanes, same comb and batch sizes), every
 *     multiplication through the emulated vpmadd52luq/huq: the test-only build that runs the IFMA
 *     engine's code on any CPU; or
 *   - SPN_EMULATE_AVX2: the AVX2 engine's (4 lanes), its radix-2^26 field (core_fe26.h) on an
 *     emulated vpmuludq, likewise; or
 *   - nothing: the scalar engine's tuning (1 lane): fe_mul and fe_sqr with 128-bit column products
 *     reduced as they are formed (same representation; limb 4 within core_fe52.h's wider m = 1
 *     bound), so add, sub and neg skip their carries (core_fe52.h's lazy form: about 7% of a b·T),
 *     a narrower comb and larger batches.
 *
 * Masks are lane bits (bit i: lane i). Selections turn a bit into an all-ones or zero word through
 * an empty asm the compiler cannot see through, so it cannot turn them back into branches. */
#ifndef SPN_CORE_LANES_C_H
#define SPN_CORE_LANES_C_H

#include <stdint.h>

#ifndef SPN_LANES
#error "define SPN_LANES before including core_lanes_c.h"
#endif

#define SPN_EC_FN
#if defined(SPN_EMULATE_IFMA) || defined(SPN_EMULATE_AVX2)
#ifdef SPN_EMULATE_AVX2
#define SPN_EC_GROUP 16 /* as core_lanes_avx2.h */
#else
#define SPN_EC_GROUP 8 /* as core_lanes_ifma.h */
#endif
#define SPN_GEN_W 7
/* A test build: small code and a quick compile rather than speed. */
#define SPN_UNROLL
#define FE52_INLINE static inline
#define FE26_INLINE static inline
#define LV_INLINE static inline __attribute__((always_inline))
#define SPN_EC_HOT static inline
#else
#define SPN_EC_GROUP 64
#define SPN_GEN_W 6
#define SPN_FE52_OWN_MUL
#define SPN_FE52_LAZY
#define SPN_EC_JACOBIAN
#define LV_INLINE static inline __attribute__((always_inline))
#endif
#define LV_EACH for (int q_ = 0; q_ < SPN_LANES; q_++)

typedef struct {
    uint64_t v[SPN_LANES];
} spn_lv;
typedef unsigned spn_mask;

/* All ones when bit 0 of b is set, else 0, opaque to the optimiser. */
LV_INLINE uint64_t lv_word_of_bit(uint64_t b) {
    uint64_t w = 0 - (b & 1);
    __asm__("" : "+r"(w));
    return w;
}

/* 1 when x is not 0, without a comparison. */
LV_INLINE uint64_t lv_nonzero(uint64_t x) { return (x | (0 - x)) >> 63; }

LV_INLINE spn_lv lv_load(const uint64_t w[SPN_LANES]) {
    spn_lv r;
    LV_EACH r.v[q_] = w[q_];
    return r;
}
LV_INLINE void lv_store(uint64_t w[SPN_LANES], spn_lv a) { LV_EACH w[q_] = a.v[q_]; }
LV_INLINE spn_lv lv_set1(uint64_t x) {
    spn_lv r;
    LV_EACH r.v[q_] = x;
    return r;
}

#define LV_BINARY(name, expr)                      \
    LV_INLINE spn_lv name(spn_lv a, spn_lv b) {    \
        spn_lv r;                                  \
        LV_EACH {                                  \
            uint64_t x = a.v[q_], y = b.v[q_];     \
            r.v[q_] = (expr);                      \
        }                                          \
        return r;                                  \
    }
LV_BINARY(lv_and, x & y)
LV_BINARY(lv_or, x | y)
LV_BINARY(lv_xor, x ^ y)
LV_BINARY(lv_add, x + y)
LV_BINARY(lv_sub, x - y)
LV_BINARY(lv_mullo, x * y)
LV_BINARY(lv_mul32, (x & 0xFFFFFFFFu) * (y & 0xFFFFFFFFu))
#undef LV_BINARY

LV_INLINE spn_lv lv_shr(spn_lv a, unsigned s) {
    spn_lv r;
    LV_EACH r.v[q_] = a.v[q_] >> s;
    return r;
}
LV_INLINE spn_lv lv_shl(spn_lv a, unsigned s) {
    spn_lv r;
    LV_EACH r.v[q_] = a.v[q_] << s;
    return r;
}
LV_INLINE spn_lv lv_select(spn_mask m, spn_lv a, spn_lv b) {
    spn_lv r;
    LV_EACH {
        uint64_t w = lv_word_of_bit(m >> q_);
        r.v[q_] = (a.v[q_] & ~w) | (b.v[q_] & w);
    }
    return r;
}
LV_INLINE spn_mask lv_eq(spn_lv a, spn_lv b) {
    spn_mask m = 0;
    LV_EACH m |= (spn_mask)((lv_nonzero(a.v[q_] ^ b.v[q_]) ^ 1) << q_);
    return m;
}
LV_INLINE spn_mask lv_test(spn_lv a, spn_lv b) {
    spn_mask m = 0;
    LV_EACH m |= (spn_mask)(lv_nonzero(a.v[q_] & b.v[q_]) << q_);
    return m;
}

/* vpmadd52luq / vpmadd52huq on each lane. */
#define M52_ 0xFFFFFFFFFFFFFULL
LV_INLINE spn_lv lv_madd52lo(spn_lv acc, spn_lv a, spn_lv b) {
    LV_EACH acc.v[q_] += (uint64_t)((spn_u128)(a.v[q_] & M52_) * (b.v[q_] & M52_)) & M52_;
    return acc;
}
LV_INLINE spn_lv lv_madd52hi(spn_lv acc, spn_lv a, spn_lv b) {
    LV_EACH acc.v[q_] += (uint64_t)(((spn_u128)(a.v[q_] & M52_) * (b.v[q_] & M52_)) >> 52);
    return acc;
}
#undef M52_

LV_INLINE spn_mask mk_bits(unsigned bits) { return bits & ((1u << SPN_LANES) - 1); }
LV_INLINE unsigned mk_to_bits(spn_mask m) { return m; }
LV_INLINE spn_mask mk_and(spn_mask a, spn_mask b) { return a & b; }
LV_INLINE spn_mask mk_or(spn_mask a, spn_mask b) { return a | b; }
LV_INLINE spn_mask mk_xor(spn_mask a, spn_mask b) { return a ^ b; }
LV_INLINE spn_mask mk_not(spn_mask a) { return ~a & ((1u << SPN_LANES) - 1); }

/* cols[c][idx] per lane: every entry of every column is read and masked in (one mask per entry). */
LV_INLINE void lv_pick(spn_lv out[8], const uint64_t cols[8][1 << (SPN_GEN_W - 1)], spn_lv idx) {
    LV_EACH {
        uint64_t acc[8] = {0}, i = idx.v[q_];
        for (uint64_t e = 0; e < (1u << (SPN_GEN_W - 1)); e++) {
            uint64_t m = lv_word_of_bit(lv_nonzero(e ^ i) ^ 1);
            for (int c = 0; c < 8; c++) acc[c] |= cols[c][e] & m;
        }
        for (int c = 0; c < 8; c++) out[c].v[q_] = acc[c];
    }
}

/* cols[c][idx] of each lane's own table (SPN_EC_JACOBIAN): every entry is read and masked in. */
LV_INLINE void lv_pick16(spn_lv out[8], const spn_lv cols[8][16], spn_lv idx) {
    LV_EACH {
        uint64_t acc[8] = {0}, i = idx.v[q_];
        for (uint64_t e = 0; e < 16; e++) {
            uint64_t m = lv_word_of_bit(lv_nonzero(e ^ i) ^ 1);
            for (int c = 0; c < 8; c++) acc[c] |= cols[c][e].v[q_] & m;
        }
        for (int c = 0; c < 8; c++) out[c].v[q_] = acc[c];
    }
}

#ifdef SPN_EMULATE_AVX2
#include "core_fe26.h"
#else
#include "core_fe52.h"
#endif

#ifdef SPN_FE52_OWN_MUL
/* The scalar tuning: a product's nine columns c0..c8 (c_k = Σ a_i·b_j over i + j = k, each below
 * 2^113 for limbs below 2^55) are reduced while they are formed, by two 128-bit accumulators. The
 * high one walks columns 3..7 (c8 is folded into columns 3 and 4 first: 2^416 ≡ R·2^156); each
 * 52-bit digit it leaves at column 5 + k stands for digit·R at column k (2^260 ≡ R), which the low
 * one adds to columns 0..2 as it walks them; what the high one holds at the end is column 8's carry
 * (≡ R at column 3). The two walks overlap, so the critical path is about half that of reducing the
 * nine columns after forming them. Output: limbs 0..3 below 2^52, limb 4 below 2^48 + 2^40 (the
 * scalar backend's m = 1) for lazy inputs with m_a·m_b ≤ 120 or carried ones with m ≤ 15 (column 7
 * bounds what reaches limb 4: below m_a·m_b·2^33 when lazy). */
LV_INLINE void fe52_columns_reduce(uint64_t r[5], spn_u128 c[9]) {
    spn_u128 hi = c[3] + (spn_u128)(uint64_t)c[8] * FE_R, lo;
    uint64_t r3, r4, top, u;
    r3 = (uint64_t)hi & M52;
    hi = (hi >> 52) + c[4] + (spn_u128)(uint64_t)(c[8] >> 64) * (FE_R << 12);
    r4 = (uint64_t)hi & M52;
    top = r4 >> 48; /* bits 256..259 of the value: top·2^256 ≡ top·C */
    r4 &= M48;
    hi = (hi >> 52) + c[5];
    u = (uint64_t)hi & M52; /* digit at 2^260 */
    lo = c[0] + (spn_u128)((u << 4) | top) * FE_C;
    r[0] = (uint64_t)lo & M52;
    hi = (hi >> 52) + c[6];
    u = (uint64_t)hi & M52;
    lo = (lo >> 52) + c[1] + (spn_u128)u * FE_R;
    r[1] = (uint64_t)lo & M52;
    hi = (hi >> 52) + c[7];
    u = (uint64_t)hi & M52;
    lo = (lo >> 52) + c[2] + (spn_u128)u * FE_R;
    r[2] = (uint64_t)lo & M52;
    lo = (lo >> 52) + r3 + (spn_u128)(uint64_t)(hi >> 52) * FE_R;
    r[3] = (uint64_t)lo & M52;
    r[4] = r4 + (uint64_t)(lo >> 52);
}

/* r = a·b for lazy a, b with m_a·m_b ≤ 120 (the lane API's m ≤ 8 each), or carried ones with m ≤ 15.
 * r may alias a or b. */
LV_INLINE void fe_mul(fe *r, const fe *a, const fe *b) {
    LV_EACH {
        uint64_t x[5], y[5], o[5];
        spn_u128 c[9] = {0};
        SPN_UNROLL
        for (int i = 0; i < 5; i++) {
            x[i] = a->l[i].v[q_];
            y[i] = b->l[i].v[q_];
        }
        SPN_UNROLL
        for (int i = 0; i < 5; i++)
            SPN_UNROLL
            for (int j = 0; j < 5; j++) c[i + j] += (spn_u128)x[i] * y[j];
        fe52_columns_reduce(o, c);
        SPN_UNROLL
        for (int i = 0; i < 5; i++) r->l[i].v[q_] = o[i];
    }
}

/* r = a² for lazy a with m_a ≤ 10, or carried with m_a ≤ 15. The cross products take one doubled
 * factor (below 2^56). */
LV_INLINE void fe_sqr(fe *r, const fe *a) {
    LV_EACH {
        uint64_t x[5], o[5];
        spn_u128 c[9] = {0};
        SPN_UNROLL
        for (int i = 0; i < 5; i++) x[i] = a->l[i].v[q_];
        SPN_UNROLL
        for (int i = 0; i < 5; i++) {
            c[2 * i] += (spn_u128)x[i] * x[i];
            SPN_UNROLL
            for (int j = i + 1; j < 5; j++) c[i + j] += (spn_u128)(2 * x[i]) * x[j];
        }
        fe52_columns_reduce(o, c);
        SPN_UNROLL
        for (int i = 0; i < 5; i++) r->l[i].v[q_] = o[i];
    }
}
#endif

#endif
