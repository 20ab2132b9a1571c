/* The AVX2 lane backend (core_ec_lanes.h): 4 lanes of __m256i, masks as all-ones or all-zeros 64-bit
 * lanes, the field in radix 2^26 on vpmuludq (core_fe26.h). x86-64 only; every function carries a
 * target attribute, so the extension is built without global -mavx2 and runs on any x86-64. */
#ifndef SPN_CORE_LANES_AVX2_H
#define SPN_CORE_LANES_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#define SPN_LANES 4
#define SPN_EC_GROUP 16
#define SPN_GEN_W 7
/* b·T on the odd-digit Jacobian ladder (ecmult_odd, lookups by lv_pick16), as the scalar engine: 2M + 5S
 * doublings and 7M + 5S additions against the complete formulas' 6M + 2S and 12M, and a lookup of 8
 * words per entry instead of 30 limbs (b·T 19.0 -> 14.6 us per point, Zen 4). */
#define SPN_EC_JACOBIAN

/* Under AddressSanitizer GCC moves aligned vector locals to its fake stack without their alignment;
 * the vector functions are built uninstrumented and touch callers' buffers only through plain helpers
 * (core_ec_group.h), which ASan checks. */
#if defined(__SANITIZE_ADDRESS__)
#define SPN_AVX2_NOASAN __attribute__((no_sanitize_address))
#else
#define SPN_AVX2_NOASAN
#endif
#define SPN_EC_FN __attribute__((target("avx2"))) SPN_AVX2_NOASAN
#define LV_INLINE static inline __attribute__((always_inline)) SPN_EC_FN

typedef __m256i spn_lv;
typedef __m256i spn_mask;

LV_INLINE spn_lv lv_load(const uint64_t w[4]) { return _mm256_loadu_si256((const __m256i *)w); }
LV_INLINE void lv_store(uint64_t w[4], spn_lv a) { _mm256_storeu_si256((__m256i *)w, a); }
LV_INLINE spn_lv lv_set1(uint64_t x) { return _mm256_set1_epi64x((long long)x); }
LV_INLINE spn_lv lv_and(spn_lv a, spn_lv b) { return _mm256_and_si256(a, b); }
LV_INLINE spn_lv lv_or(spn_lv a, spn_lv b) { return _mm256_or_si256(a, b); }
LV_INLINE spn_lv lv_xor(spn_lv a, spn_lv b) { return _mm256_xor_si256(a, b); }
LV_INLINE spn_lv lv_shr(spn_lv a, unsigned s) { return _mm256_srli_epi64(a, (int)s); }
LV_INLINE spn_lv lv_shl(spn_lv a, unsigned s) { return _mm256_slli_epi64(a, (int)s); }
LV_INLINE spn_lv lv_select(spn_mask m, spn_lv a, spn_lv b) { return _mm256_blendv_epi8(a, b, m); }
LV_INLINE spn_mask lv_eq(spn_lv a, spn_lv b) { return _mm256_cmpeq_epi64(a, b); }
LV_INLINE spn_mask lv_test(spn_lv a, spn_lv b) {
    return _mm256_xor_si256(_mm256_cmpeq_epi64(_mm256_and_si256(a, b), _mm256_setzero_si256()), lv_set1(~0ULL));
}
LV_INLINE spn_lv lv_add(spn_lv a, spn_lv b) { return _mm256_add_epi64(a, b); }
LV_INLINE spn_lv lv_sub(spn_lv a, spn_lv b) { return _mm256_sub_epi64(a, b); }
LV_INLINE spn_lv lv_mul32(spn_lv a, spn_lv b) { return _mm256_mul_epu32(a, b); }

LV_INLINE spn_mask mk_bits(unsigned bits) {
    const spn_lv lane_bit = _mm256_setr_epi64x(1, 2, 4, 8);
    return _mm256_cmpeq_epi64(_mm256_and_si256(lv_set1(bits), lane_bit), lane_bit);
}
LV_INLINE unsigned mk_to_bits(spn_mask m) { return (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(m)); }
LV_INLINE spn_mask mk_and(spn_mask a, spn_mask b) { return _mm256_and_si256(a, b); }
LV_INLINE spn_mask mk_or(spn_mask a, spn_mask b) { return _mm256_or_si256(a, b); }
LV_INLINE spn_mask mk_xor(spn_mask a, spn_mask b) { return _mm256_xor_si256(a, b); }
LV_INLINE spn_mask mk_not(spn_mask a) { return _mm256_xor_si256(a, lv_set1(~0ULL)); }

#if SPN_GEN_W != 7
#error "lv_pick below reads 64-entry columns"
#endif
/* Entry idx of each 64-entry column, per lane, inside registers: vpermd moves each lane's entry
 * within every block of 4 (as the dword pair 2·(idx mod 4), 2·(idx mod 4) + 1), then blends on the
 * index's bits 2..5 choose the block. Every entry is loaded. */
LV_INLINE void lv_pick(spn_lv out[8], const uint64_t cols[8][64], spn_lv idx) {
    spn_lv lo2 = lv_shl(lv_and(idx, lv_set1(3)), 1);
    spn_lv perm = lv_or(lo2, lv_shl(lv_add(lo2, lv_set1(1)), 32));
    spn_mask hi[4];
    _Pragma("GCC unroll 4")
    for (int b = 0; b < 4; b++) hi[b] = lv_test(idx, lv_set1(4ULL << b));
    _Pragma("GCC unroll 8")
    for (int c = 0; c < 8; c++) {
        spn_lv v[16];
        _Pragma("GCC unroll 16")
        for (int r = 0; r < 16; r++)
            v[r] = _mm256_permutevar8x32_epi32(_mm256_load_si256((const __m256i *)(cols[c] + 4 * r)), perm);
        _Pragma("GCC unroll 4")
        for (int b = 0, cnt = 16; cnt > 1; b++, cnt /= 2)
            _Pragma("GCC unroll 8")
            for (int r = 0; r < cnt / 2; r++) v[r] = lv_select(hi[b], v[2 * r], v[2 * r + 1]);
        out[c] = v[0];
    }
}

/* Each lane's entry idx (< 16) of its own table: every entry is read and blended in where it matches. */
LV_INLINE void lv_pick16(spn_lv out[8], const spn_lv cols[8][16], spn_lv idx) {
    _Pragma("GCC unroll 8")
    for (int c = 0; c < 8; c++) out[c] = cols[c][0];
    _Pragma("GCC unroll 15")
    for (int j = 1; j < 16; j++) {
        spn_mask m = lv_eq(idx, lv_set1((uint64_t)j));
        _Pragma("GCC unroll 8")
        for (int c = 0; c < 8; c++) out[c] = lv_select(m, out[c], cols[c][j]);
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("schedule-insns", "sched-pressure")
#endif
/* One multiplication is about 300 vector instructions and issue-bound: called, not inlined. */
#define FE26_MUL_FN static __attribute__((noinline)) SPN_EC_FN
#include "core_fe26.h"

#endif
