/* The EC engine cores: the curve work of a scan on SPN_LANES-wide vectors, one source
 * (core_ec_group.h over the lane API of core_ec_lanes.h) for every backend, and the scalar
 * arithmetic mod n they share (core_scalar.c). Plain C with no Python and no libsecp256k1: the
 * cores build and run alone (e.g. cross-compiled for a C differential); core_engines.c adapts them
 * to the scan's spn_engine interface.
 *
 * A point crosses a core's entry points as 64 bytes: x then y, each 32 bytes little-endian (the
 * layout of libsecp256k1's secp256k1_pubkey on 64-bit builds). A serialized result whose first byte
 * is 0 means "no point" (infinity, or an invalid scalar). */
#ifndef SPN_CORE_EC_H
#define SPN_CORE_EC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 spn_u128;

/* Set n bytes to zero; the barrier keeps the compiler from dropping the store. */
static inline void spn_cleanse(void *p, size_t n) {
    memset(p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
}

/* ---- CPU features (core_cpu.c; 0 off x86-64) ---- */

/* AVX-512 F, DQ, BW, VL and IFMA, and the OS saves the opmask and zmm state (XCR0 bits 1, 2, 5, 6, 7). */
int spn_has_ifma(void);
/* AVX2 and BMI2, and the OS saves the ymm state (XCR0 bits 1, 2). */
int spn_has_avx2(void);

/* ---- scalars mod n (core_scalar.c; constant time: fixed loops, masks, no branch on a scalar) ---- */

enum { SPN_GLV_W = 5, SPN_GLV_WIN = 26 }; /* variable-base window bits; digits per GLV half */

/* k ≡ ±|k1| ± |k2|·λ (mod n), |k1|, |k2| < 2^128, as signed base-2^5 digits (least significant
 * first, each in [−15, 16]) and the two signs (neg[h] = 1: that half is negated). */
typedef struct {
    int8_t d[2][SPN_GLV_WIN];
    uint8_t neg[2];
    /* The odd form (spn_glv_recode_odd): k ≡ Σ_h λ^h Σ_i (2·u[h][i] − 31)·2^(5i) (mod n), every digit
     * odd, so never 0 (u[h][i] < 32). */
    uint8_t u[2][SPN_GLV_WIN];
} spn_glv;

/* n, the group order, as little-endian 64-bit words. */
extern const uint64_t spn_scalar_n[4];
/* r = the big-endian b32 as little-endian 64-bit words (no reduction). */
void spn_scalar_from_b32(uint64_t r[4], const unsigned char b32[32]);
/* r = a·b mod n, for a, b < 2^256; r may alias a or b. */
void spn_scalar_mul(uint64_t r[4], const uint64_t a[4], const uint64_t b[4]);
/* Every form of k < n (a scan key's, once). */
void spn_glv_recode(spn_glv *out, const uint64_t k[4]);
/* One form of k < n, the others left as they are: d and neg; or u. */
void spn_glv_recode_digits(spn_glv *out, const uint64_t k[4]);
void spn_glv_recode_odd(spn_glv *out, const uint64_t k[4]);
/* w = a·b for 256-bit a, b in little-endian 64-bit words (fixed loops: constant time). */
void spn_mul_256(uint64_t w[8], const uint64_t a[4], const uint64_t b[4]);
/* For sending and BIP374 proofs: r = (a + b) mod n for a, b < n; r = x mod n for any 256-bit x. */
void spn_scalar_add(unsigned char r32[32], const unsigned char a32[32], const unsigned char b32[32]);
void spn_scalar_reduce(unsigned char r32[32], const unsigned char x32[32]);

/* ---- an engine core ---- */

/* Field operations of the tests' fe_test entry. */
enum {
    SPN_FE_MUL = 0,   /* a·b */
    SPN_FE_SQR = 1,   /* a² */
    SPN_FE_INV = 2,   /* a^(p-2) (0 for 0) */
    SPN_FE_SQRT = 3,  /* a^((p+1)/4): the square root when a is a square */
    SPN_FE_ADD = 4,   /* a + b */
    SPN_FE_SUB = 5,   /* a − b */
    SPN_FE_NEG = 6,   /* −a */
    SPN_FE_MUL21 = 7, /* 21·a */
    SPN_FE_MUL8 = 8,  /* (8a)·(8b), 8a and 8b as sums (the lane API's largest multiplicands) */
    SPN_FE_SQR8 = 9,  /* (8a)², likewise */
};

/* Point additions of the tests' ge_test entry: r = p + q, q affine, p in the formula's coordinates. */
enum {
    SPN_GE_MADD_CT = 0, /* the ladders' unified addition (gej_madd_ct): p Jacobian, x = X/Z², y = Y/Z³ */
    SPN_GE_MADD = 1,    /* the complete formula (ge_madd): p projective, x = X/Z, y = Y/Z */
};

/* The entry points of one core, any n, in vectors of `lanes` with batched inversions. Safe without
 * the GIL and from several threads at once once start() returned 1. */
typedef struct {
    const char *name; /* "ifma", "scalar", "ifma-emu" (test build), ... */
    int lanes;
    /* 1 when this CPU and OS can run the core (the other entries may only be called then). */
    int (*cpu)(void);
    /* Build the fixed-base table with the core's own arithmetic (no other library): 1 ready, 0 when
     * cpu() is 0. Idempotent; the first call must finish before any other entry runs (call it from
     * one thread, e.g. with the GIL held). */
    int (*start)(void);
    /* Parse n points of `width` bytes (33: ser_P; 64: x ‖ y big-endian): valid[i] = 1 when point i is
     * on the curve (x, y < p, prefix 02/03), pt64[i] its affine coordinates. Public data. */
    void (*parse_points)(const unsigned char *in, size_t width, size_t n, unsigned char (*pt64)[64],
                         unsigned char *valid);
    /* ecdh33[i] = ser_P(k_i·T_i) with k_i = b (recoded in glv) when scalar32 is NULL, else b·scalar32[i]
     * mod n (recoded per lane; glv is then unused and may be NULL), and out64[i] the point when out64
     * is not NULL. Constant time in b and the products; first byte 0 when scalar32[i] is 0 or ≥ n or
     * the result is infinity. T_i must be on the curve. */
    void (*shared_secrets)(const spn_glv *glv, const uint64_t b[4], const unsigned char (*pt64)[64],
                           const unsigned char (*scalar32)[32], size_t n, unsigned char (*ecdh33)[33],
                           unsigned char (*out64)[64]);
    /* P_i = spend + t_i·G: p33[i] = ser_P(P_i) (first byte 0 when t_i is 0 or ≥ n, or P_i is infinity),
     * pk64[i] its coordinates. Constant time in t_i. */
    void (*spend_points)(const unsigned char spend64[64], const unsigned char (*t32)[32], size_t n,
                         unsigned char (*pk64)[64], unsigned char (*p33)[33]);
    /* sums33[i·n_labels + m] = ser_P(P_i + L_m) (first byte 0 at infinity). */
    void (*label_sums)(const unsigned char (*pk64)[64], size_t n, const unsigned char (*label64)[64],
                       size_t n_labels, unsigned char (*sums33)[33]);
    /* Sums of public keys, n sets at once: set i is keys33[first[i] .. first[i+1]) (ser_P; an x-only
     * key as 02 ‖ x), each counted when it is a point. found[i] = 1 and sum64[i] the affine sum, or
     * found[i] = 0 when none of them is a point or they sum to infinity. Public data. */
    void (*key_sums)(const unsigned char (*keys33)[33], const size_t *first, size_t n, unsigned char (*sum64)[64],
                     unsigned char *found);
    /* Light-client tweaks: tweak33[i] = ser_P(s_i·A_i) with s_i = scalar32[i] and out64[i] the point, for
     * public s_i and A_i = pt64[i] (variable time); first byte 0 when s_i is 0 or ≥ n. */
    void (*tweaks)(const unsigned char (*pt64)[64], const unsigned char (*scalar32)[32], size_t n,
                   unsigned char (*tweak33)[33], unsigned char (*out64)[64]);
    /* Field tests: out32[i] = op(a_i, b_i) mod p, big-endian and fully reduced, for n values given as
     * raw limbs (value i, limb j at [i·raw_limbs + j], each below 2^raw_bits; see core_ec_lanes.h). */
    void (*fe_test)(int op, const uint64_t *a, const uint64_t *b, size_t n, unsigned char (*out32)[32]);
    /* Point tests: r_i = op(p_i, q_i) for p96[i] = X ‖ Y ‖ Z and q64[i] = x ‖ y (32 bytes little-endian
     * each, values below 2^256): out64[i] = r_i affine (x ‖ y little-endian) and inf[i] = 1 when r_i is
     * infinity (out64[i] is then 0). */
    void (*ge_test)(int op, const unsigned char (*p96)[96], const unsigned char (*q64)[64], size_t n,
                    unsigned char (*out64)[64], unsigned char *inf);
    int raw_bits, raw_limbs;
} spn_ec_core;

/* The 8-lane AVX-512 IFMA core (core_ec_ifma.c; cpu() is 0 off x86-64 and the entries NULL there). */
extern const spn_ec_core spn_ec_ifma;
/* The 4-lane AVX2 core (core_ec_avx2.c; cpu() is 0 off x86-64 and the entries NULL there). */
extern const spn_ec_core spn_ec_avx2;
/* The portable 1-lane core (core_ec_scalar.c): every CPU. */
extern const spn_ec_core spn_ec_scalar;
/* Test-only build (testing_ec_emu.c, in sp_scan.native._testcore): the IFMA core's source over the
 * portable emulation of its 8 lanes, on every CPU. */
extern const spn_ec_core spn_ec_ifma_emu;
/* Test-only build (testing_ec_avx2_emu.c): the AVX2 core's source over the portable emulation of its 4
 * lanes and of vpmuludq, on every CPU. */
extern const spn_ec_core spn_ec_avx2_emu;

#endif
