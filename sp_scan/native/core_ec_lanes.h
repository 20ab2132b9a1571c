/* The lane-vector field API every EC engine's group law is written over (core_ec_group.h).
 *
 * An engine is one backend header plus core_ec_group.h, instantiated in one .c file:
 *
 *     #define SPN_EC_ID ifma                (names the engine's entry points: spn_ec_ifma)
 *     #include "core_lanes_ifma.h"          (the backend: defines everything listed below)
 *     #include "core_ec_group.h"            (includes this file, then the group law once)
 *
 * Backends: core_lanes_ifma.h (AVX-512 IFMA, 8 lanes, radix 2^52 on vpmadd52luq/huq) and
 * core_lanes_c.h (plain C over lane arrays: 8 lanes emulating IFMA for the test-only build, or 1 lane
 * on four 64-bit words for the scalar engine); an AVX2 backend implements the same names on 4 lanes.
 *
 * Adding an engine "x": a backend header core_lanes_x.h; core_ec_x.c instantiating it (SPN_EC_CORE
 * spn_ec_x, SPN_EC_LABEL "x", SPN_EC_CPU its cpuid check, e.g. spn_has_avx2 in core_cpu.c) and
 * `extern const spn_ec_core spn_ec_x;` in core_ec.h; in core_engines.c one SPN_LANE_ENGINE(x, "x",
 * spn_ec_x) line and its entry in ENGINES (the "avx2" slot is there); &spn_ec_x in testing_hooks.c's
 * CORES. An emulated build of it for the tests: testing_ec_x_emu.c (only sp_scan.native._testcore
 * compiles testing_*.c), listed the same way under SPN_TESTING.
 *
 * ---- what a backend defines (everything a function: static inline, SPN_EC_FN attributes) ----
 *
 * Parameters
 *   SPN_LANES        lanes per vector: 1, 4 or 8.
 *   SPN_EC_FN        attributes of every function that handles these types (target("...") when the
 *                    backend needs instructions the build's baseline lacks; may be empty).
 *   SPN_EC_GROUP     vectors per batched inversion (the entry points work on up to SPN_LANES·SPN_EC_GROUP
 *                    items at a time; stack use grows with it).
 *   SPN_GEN_W        bits per window of the fixed-base comb, 2..8: the table has 2^(SPN_GEN_W−1) entries
 *                    per window (SPN_GEN_ENTRIES), ceil(257 / SPN_GEN_W) windows.
 *   SPN_FE_RAW_BITS, SPN_FE_RAW_LIMBS   the raw layout fe_from_raw reads (field tests only).
 *
 * Types
 *   spn_lv     SPN_LANES unsigned 64-bit integers, one per lane.
 *   spn_mask   one flag per lane.
 *   fe         SPN_LANES field elements mod p = 2^256 − 2^32 − 977, with a magnitude (below).
 *
 * Lane vectors and masks (constant time: no branch or address depends on a lane's value)
 *   spn_lv   lv_load(const uint64_t w[SPN_LANES])          lane i = w[i]
 *   void     lv_store(uint64_t w[SPN_LANES], spn_lv a)
 *   spn_lv   lv_set1(uint64_t x)                           every lane = x
 *   spn_lv   lv_and(a, b), lv_or(a, b), lv_xor(a, b)
 *   spn_lv   lv_shr(a, s), lv_shl(a, s)                    logical shifts by the same s < 64 in every lane
 *   spn_lv   lv_select(spn_mask m, spn_lv a, spn_lv b)     lanes in m take b, the others a
 *   spn_mask lv_eq(a, b)                                   lanes where a == b
 *   spn_mask lv_test(a, b)                                 lanes where a & b != 0
 *   void     lv_pick(spn_lv out[8], const uint64_t cols[8][SPN_GEN_ENTRIES], spn_lv idx)
 *                                                          out[c] lane i = cols[c][idx_i] (idx_i <
 *                                                          SPN_GEN_ENTRIES), reading every entry of every
 *                                                          column (cols 64-byte aligned)
 *   void     lv_pick16(spn_lv out[8], const spn_lv cols[8][16], spn_lv idx)
 *                                                          (SPN_EC_JACOBIAN backends) out[c] lane i = lane i
 *                                                          of cols[c][idx_i] (idx_i < 16): a table per lane,
 *                                                          every entry read
 *   spn_mask mk_bits(unsigned bits)                        lane i set when bit i of bits is
 *   unsigned mk_to_bits(spn_mask m)                        bit i set when lane i is
 *   spn_mask mk_and(a, b), mk_or(a, b), mk_xor(a, b), mk_not(a)
 *
 * Field elements. Each value has a magnitude m ≥ 1, a bound the backend defines for its
 * representation (m = 1: what fe_mul returns). The group law only relies on these rules, and keeps
 * every input and output at m ≤ 8 unless a line says otherwise:
 *   void fe_set1(fe *r, uint64_t small)                 every lane = small (< 2^32); m 1
 *   void fe_from_words(fe *r, const uint64_t w[4][SPN_LANES])
 *                                                       lane i = Σ w[j][i]·2^(64j) (any value < 2^256); m 1
 *   void fe_from_lv(fe *r, const spn_lv w[4])          the same from four lane vectors
 *   void fe_to_words(uint64_t w[4][SPN_LANES], const fe *a)
 *                                                       a canonical (fe_canon's output)
 *   void fe_mul(fe *r, const fe *a, const fe *b)        m_a, m_b ≤ 8; r m 1; r may alias a or b
 *   void fe_sqr(fe *r, const fe *a)                     m_a ≤ 8; r m 1; r may alias a
 *   void fe_add(fe *r, const fe *a, const fe *b)        r m = m_a + m_b (≤ 8)
 *   void fe_sub(fe *r, const fe *a, const fe *b, int c) r = a − b, m = m_a + c; needs m_b < c ≤ 4
 *   void fe_neg(fe *r, const fe *a, int c)              r = −a, m = c; needs m_a < c ≤ 4
 *                                                       (c: a constant at every call site)
 *   void fe_mul_small(fe *r, const fe *a, uint64_t k)  r = k·a, m 1; needs k·m_a ≤ 128
 *   void fe_half(fe *r, const fe *a)                    r = a/2, m = (m_a + 1)/2 rounded up
 *   void fe_shl(fe *r, const fe *a, int s)              r = a·2^s, m = m_a·2^s (≤ 8)
 *   void fe_normw(fe *r)                                the same value mod p, m ≤ 8 -> m 1
 *   void fe_select(fe *r, spn_mask m, const fe *a, const fe *b)   lanes in m take b, the others a
 *   void fe_canon(fe *r, const fe *a)                   m_a = 1 -> the unique value below p (still m 1)
 *   spn_mask fe_is_zero(const fe *a)                    m_a = 1; lanes whose value is 0 mod p
 *   spn_mask fe_is_odd(const fe *a)                     a canonical; lanes whose value is odd
 *   void fe_from_raw(fe *r, const uint64_t raw[SPN_FE_RAW_LIMBS][SPN_LANES])
 *                                                       field tests only: lane i's limbs as the backend
 *                                                       holds them, each below 2^SPN_FE_RAW_BITS
 *
 * The backend's own bounds (e.g. radix 2^52 carried values up to 2^260) may be wider; the field tests
 * feed fe_from_raw any value below 2^(SPN_FE_RAW_BITS·SPN_FE_RAW_LIMBS) as an input of mul, sqr, add,
 * mul_small, inv and sqrt, and values below 2^256 + 2^208 (what a multiplication may return) as the
 * subtracted input of sub and neg (c = 2).
 *
 * ---- what this file adds over them (written once) ----
 *   fe_sqr_n, fe_inv (a^(p−2), 0 for 0), fe_sqrt (a^((p+1)/4): the root when a is a square), and
 *   fe_sqrt_m for two independent square roots at once. */
#ifndef SPN_CORE_EC_LANES_H
#define SPN_CORE_EC_LANES_H

#if !defined(SPN_LANES) || !defined(SPN_EC_FN) || !defined(SPN_EC_GROUP) || !defined(SPN_GEN_W) || \
    !defined(SPN_FE_RAW_BITS) || !defined(SPN_FE_RAW_LIMBS)
#error "include a lane backend (core_lanes_*.h) before core_ec_lanes.h"
#endif

#define SPN_GEN_ENTRIES (1 << (SPN_GEN_W - 1))

/* Hot helpers are inlined, unless the backend keeps its code small (the emulation). */
#ifndef SPN_EC_HOT
#define SPN_EC_HOT static inline __attribute__((always_inline)) SPN_EC_FN
#endif

/* r = a squared n times (n ≥ 1). */
SPN_EC_HOT void fe_sqr_n(fe *r, const fe *a, int n) {
    fe_sqr(r, a);
    for (int i = 1; i < n; i++) fe_sqr(r, r);
}

/* The exponentiations below run m ≤ FE_CHAINS independent chains side by side (r[k] from a[k]), their
 * steps interleaved: a chain of squarings waits on each result, two keep the vector engines busy (about
 * 1.3x the throughput on Zen 4's AVX2). A backend may set SPN_FE_CHAINS to 1. */
#ifndef SPN_FE_CHAINS
#define SPN_FE_CHAINS 2
#endif
enum { FE_CHAINS = SPN_FE_CHAINS };

SPN_EC_HOT void fe_sqr_n_m(int m, fe *r, const fe *a, int n) {
    for (int k = 0; k < m; k++) fe_sqr(&r[k], &a[k]);
    for (int i = 1; i < n; i++)
        for (int k = 0; k < m; k++) fe_sqr(&r[k], &r[k]);
}

SPN_EC_HOT void fe_mul_m(int m, fe *r, const fe *a, const fe *b) {
    for (int k = 0; k < m; k++) fe_mul(&r[k], &a[k], &b[k]);
}

/* The head both exponentiations share (the addition chain libsecp256k1's exponentiations use):
 * x2 = a^3 and t = a^((2^223 − 1)·2^23 + 2^22 − 1), for m chains. */
SPN_EC_HOT void fe_pow_head(int m, fe *t, fe *x2, const fe *a) {
    fe x3[FE_CHAINS], x6[FE_CHAINS], x9[FE_CHAINS], x11[FE_CHAINS], x22[FE_CHAINS], x44[FE_CHAINS], x88[FE_CHAINS],
        x176[FE_CHAINS], x220[FE_CHAINS], x223[FE_CHAINS], u[FE_CHAINS];
    if (FE_CHAINS == 1) m = 1; /* so the compiler sees every chain written */
    fe_sqr_n_m(m, u, a, 1);
    fe_mul_m(m, x2, u, a);
    fe_sqr_n_m(m, u, x2, 1);
    fe_mul_m(m, x3, u, a);
    fe_sqr_n_m(m, u, x3, 3);
    fe_mul_m(m, x6, u, x3);
    fe_sqr_n_m(m, u, x6, 3);
    fe_mul_m(m, x9, u, x3);
    fe_sqr_n_m(m, u, x9, 2);
    fe_mul_m(m, x11, u, x2);
    fe_sqr_n_m(m, u, x11, 11);
    fe_mul_m(m, x22, u, x11);
    fe_sqr_n_m(m, u, x22, 22);
    fe_mul_m(m, x44, u, x22);
    fe_sqr_n_m(m, u, x44, 44);
    fe_mul_m(m, x88, u, x44);
    fe_sqr_n_m(m, u, x88, 88);
    fe_mul_m(m, x176, u, x88);
    fe_sqr_n_m(m, u, x176, 44);
    fe_mul_m(m, x220, u, x44);
    fe_sqr_n_m(m, u, x220, 3);
    fe_mul_m(m, x223, u, x3);
    fe_sqr_n_m(m, u, x223, 23);
    fe_mul_m(m, t, u, x22);
}

/* r = a^(p−2) = 1/a (0 for 0): 255 squarings, 15 multiplications. m_a ≤ 8; r m 1. */
SPN_EC_FN static void fe_inv(fe *r, const fe *a) {
    fe t, x2;
    fe_pow_head(1, &t, &x2, a);
    fe_sqr_n(&t, &t, 5);
    fe_mul(&t, &t, a);
    fe_sqr_n(&t, &t, 3);
    fe_mul(&t, &t, &x2);
    fe_sqr_n(&t, &t, 2);
    fe_mul(r, &t, a);
}

/* r[k] = a[k]^((p+1)/4), k < m ≤ FE_CHAINS: a square root of a[k] when it is a square (the caller
 * checks r² = a). m_a ≤ 8; r m 1. */
SPN_EC_FN static void fe_sqrt_m(int m, fe *r, const fe *a) {
    fe t[FE_CHAINS], x2[FE_CHAINS];
    if (FE_CHAINS == 1) m = 1;
    fe_pow_head(m, t, x2, a);
    fe_sqr_n_m(m, t, t, 6);
    fe_mul_m(m, t, t, x2);
    fe_sqr_n_m(m, r, t, 2);
}

SPN_EC_FN static void fe_sqrt(fe *r, const fe *a) { fe_sqrt_m(1, r, a); }

#endif
