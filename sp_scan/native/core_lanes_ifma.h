/* The AVX-512 IFMA lane backend (core_ec_lanes.h): 8 lanes of __m512i, __mmask8 masks, the field in
 * radix 2^52 on vpmadd52luq/huq (core_fe52.h). x86-64 only; every function carries a target
 * attribute, so the extension is built without global -mavx512* flags and runs on any x86-64. */
#ifndef SPN_CORE_LANES_IFMA_H
#define SPN_CORE_LANES_IFMA_H

#include <immintrin.h>
#include <stdint.h>

#define SPN_LANES 8
#define SPN_EC_GROUP 8
#define SPN_GEN_W 7

/* Under AddressSanitizer, GCC moves the 64-byte-aligned locals of these functions to its
 * use-after-return fake stack without keeping their alignment (aligned AVX-512 accesses then fault),
 * so the AVX-512 functions are built uninstrumented. They never touch caller memory themselves:
 * reads and writes of callers' buffers go through plain helpers (core_ec_group.h), which ASan checks. */
#if defined(__SANITIZE_ADDRESS__)
#define SPN_IFMA_NOASAN __attribute__((no_sanitize_address))
#else
#define SPN_IFMA_NOASAN
#endif
#define SPN_EC_FN __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512ifma"))) SPN_IFMA_NOASAN
#define LV_INLINE static inline __attribute__((always_inline)) SPN_EC_FN

typedef __m512i spn_lv;
typedef __mmask8 spn_mask;

LV_INLINE spn_lv lv_load(const uint64_t w[8]) { return _mm512_loadu_si512(w); }
LV_INLINE void lv_store(uint64_t w[8], spn_lv a) { _mm512_storeu_si512(w, a); }
LV_INLINE spn_lv lv_set1(uint64_t x) { return _mm512_set1_epi64((long long)x); }
LV_INLINE spn_lv lv_and(spn_lv a, spn_lv b) { return _mm512_and_si512(a, b); }
LV_INLINE spn_lv lv_or(spn_lv a, spn_lv b) { return _mm512_or_si512(a, b); }
LV_INLINE spn_lv lv_xor(spn_lv a, spn_lv b) { return _mm512_xor_si512(a, b); }
LV_INLINE spn_lv lv_shr(spn_lv a, unsigned s) { return _mm512_srli_epi64(a, s); }
LV_INLINE spn_lv lv_shl(spn_lv a, unsigned s) { return _mm512_slli_epi64(a, s); }
LV_INLINE spn_lv lv_select(spn_mask m, spn_lv a, spn_lv b) { return _mm512_mask_blend_epi64(m, a, b); }
LV_INLINE spn_mask lv_eq(spn_lv a, spn_lv b) { return _mm512_cmpeq_epi64_mask(a, b); }
LV_INLINE spn_mask lv_test(spn_lv a, spn_lv b) { return _mm512_test_epi64_mask(a, b); }
LV_INLINE spn_lv lv_add(spn_lv a, spn_lv b) { return _mm512_add_epi64(a, b); }
LV_INLINE spn_lv lv_sub(spn_lv a, spn_lv b) { return _mm512_sub_epi64(a, b); }
LV_INLINE spn_lv lv_mullo(spn_lv a, spn_lv b) { return _mm512_mullo_epi64(a, b); }
LV_INLINE spn_lv lv_madd52lo(spn_lv acc, spn_lv a, spn_lv b) { return _mm512_madd52lo_epu64(acc, a, b); }
LV_INLINE spn_lv lv_madd52hi(spn_lv acc, spn_lv a, spn_lv b) { return _mm512_madd52hi_epu64(acc, a, b); }

LV_INLINE spn_mask mk_bits(unsigned bits) { return (spn_mask)bits; }
LV_INLINE unsigned mk_to_bits(spn_mask m) { return m; }
LV_INLINE spn_mask mk_and(spn_mask a, spn_mask b) { return (spn_mask)(a & b); }
LV_INLINE spn_mask mk_or(spn_mask a, spn_mask b) { return (spn_mask)(a | b); }
LV_INLINE spn_mask mk_xor(spn_mask a, spn_mask b) { return (spn_mask)(a ^ b); }
LV_INLINE spn_mask mk_not(spn_mask a) { return (spn_mask)~a; }

#if SPN_GEN_W != 7
#error "lv_pick below reads 64-entry columns"
#endif
/* Entry idx of each 64-entry column, per lane, inside registers: vpermt2q picks within each 16-entry
 * block, then blends on the index's high bits choose the block. Every entry is loaded. */
LV_INLINE void lv_pick(spn_lv out[8], const uint64_t cols[8][64], spn_lv idx) {
    spn_mask b4 = lv_test(idx, lv_set1(16)), b5 = lv_test(idx, lv_set1(32));
    _Pragma("GCC unroll 8")
    for (int c = 0; c < 8; c++) {
        spn_lv v[4];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < 4; r++)
            v[r] = _mm512_permutex2var_epi64(_mm512_load_si512(cols[c] + 16 * r), idx,
                                             _mm512_load_si512(cols[c] + 16 * r + 8));
        v[0] = lv_select(b4, v[0], v[1]);
        v[1] = lv_select(b4, v[2], v[3]);
        out[c] = lv_select(b5, v[0], v[1]);
    }
}

#include "core_fe52.h"

#endif
