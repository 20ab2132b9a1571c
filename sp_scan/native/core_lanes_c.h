/* The portable lane backend (core_ec_lanes.h): plain C11 over arrays of SPN_LANES 64-bit lanes, no
 * vector intrinsics (any 64-bit target with unsigned __int128: x86-64, aarch64, ...).
 *
 * The including file defines SPN_LANES first, and either
 *   - SPN_EMULATE_IFMA: the IFMA engine's schedule (8 lanes, same comb and batch sizes) and field
 *     (core_fe52.h's radix 2^52), every multiplication through an exact emulation of vpmadd52luq/huq
 *     (the low or high 52 bits of the product of two operands' low 52 bits): the test-only build that
 *     runs the IFMA engine's code on any CPU; or
 *   - SPN_EMULATE_AVX2: the AVX2 engine's (4 lanes), its radix-2^26 field (core_fe26.h) on an
 *     emulated vpmuludq, likewise; or
 *   - nothing: the scalar engine's tuning (1 lane): the field on four 64-bit words (core_fe64.h),
 *     one square-root chain at a time, a narrower comb and larger batches.
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
#define SPN_EC_GROUP 16 /* as core_lanes_avx2.h, its odd-digit ladder too */
#define SPN_EC_JACOBIAN
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
#define SPN_FE_CHAINS 1 /* two chains side by side spill registers on one lane: slower */
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

#if defined(SPN_EMULATE_AVX2)
#include "core_fe26.h"
#elif defined(SPN_EMULATE_IFMA)
#include "core_fe52.h"
#else
#include "core_fe64.h"
#endif

#endif
