/* The 8-lane AVX-512 IFMA secp256k1 engine (core_ifma*.c): declarations shared with the rest of _core.
 *
 * Everything here is compiled with per-function target attributes, so the extension builds and
 * runs on any x86-64 (or other) CPU; spn_ifma_cpu() says whether these functions may be called. */
#ifndef SPN_CORE_IFMA_H
#define SPN_CORE_IFMA_H

#include <stddef.h>
#include <stdint.h>

/* 1 when the CPU has AVX-512 F, DQ, BW, VL and IFMA and the OS saves the zmm state (XCR0 bits 1, 2,
 * 5, 6, 7); 0 otherwise (and always 0 off x86-64). */
int spn_ifma_cpu(void);

/* ---- scalars mod n (core_ifma_scalar.c; constant time) ---- */

enum { SPN_IFMA_VW = 5, SPN_IFMA_VWIN = 26 }; /* variable-base window bits; digits per GLV half */

/* k ≡ ±|k1| ± |k2|·λ (mod n), |k1|, |k2| < 2^128, as signed base-2^5 digits (least significant
 * first, each in [−15, 16]) and the two signs (neg[h] = 1: that half is negated). */
typedef struct {
    int8_t d[2][SPN_IFMA_VWIN];
    uint8_t neg[2];
} spn_ifma_glv;

/* n, the group order, as little-endian 64-bit words. */
extern const uint64_t spn_ifma_n[4];
/* r = the big-endian b32 as little-endian 64-bit words (no reduction). */
void spn_ifma_scalar_from_b32(uint64_t r[4], const unsigned char b32[32]);
/* r = a·b mod n, for a, b < 2^256; r may alias a or b. */
void spn_ifma_scalar_mul(uint64_t r[4], const uint64_t a[4], const uint64_t b[4]);
/* The GLV split and recoding of k < n. */
void spn_ifma_glv_recode(spn_ifma_glv *out, const uint64_t k[4]);

/* Build the generator table and check that secp256k1_pubkey holds x, y little-endian (the layout
 * the entry points read and write); call with the GIL held, after the libsecp256k1 binding.
 * 1 when the engine can run here (spn_ifma_cpu() and both checks), 0 otherwise. */
int spn_ifma_start(void);

/* ---- the entry points: any n, in groups of 8 lanes, batched inversions over SPN_IFMA_GROUP vectors ----
 * A point is 64 bytes: x then y, each 32 bytes little-endian (secp256k1_pubkey's data). A serialized
 * result whose first byte is 0 means "no point" (infinity, or an invalid scalar). Safe without the
 * GIL and from several threads at once once spn_ifma_start() returned 1. */
enum { SPN_IFMA_GROUP = 8 };

/* Parse n points of `width` bytes (33: ser_P; 64: x ‖ y big-endian): valid[i] = 1 when point i is on
 * the curve (x, y < p, prefix 02/03), pt64[i] its affine coordinates. Public data. */
void spn_ifma_parse_points(const unsigned char *in, size_t width, size_t n, unsigned char (*pt64)[64],
                           unsigned char *valid);
/* ecdh33[i] = ser_P(k_i·T_i) with k_i = b (recoded in glv) when scalar32 is NULL, else b·scalar32[i]
 * mod n (recoded per lane; glv is then unused and may be NULL), and out64[i] the point when out64 is
 * not NULL. Constant time in b and the products; first byte 0 when scalar32[i] is 0 or ≥ n. T_i must
 * be on the curve. */
void spn_ifma_shared_secrets(const spn_ifma_glv *glv, const uint64_t b[4], const unsigned char (*pt64)[64],
                             const unsigned char (*scalar32)[32], size_t n, unsigned char (*ecdh33)[33],
                             unsigned char (*out64)[64]);
/* P_i = spend + t_i·G: p33[i] = ser_P(P_i) (first byte 0 when t_i is 0 or ≥ n, or P_i is infinity),
 * pk64[i] its coordinates. Constant time in t_i. */
void spn_ifma_spend_points(const unsigned char spend64[64], const unsigned char (*t32)[32], size_t n,
                           unsigned char (*pk64)[64], unsigned char (*p33)[33]);
/* sums33[i·n_labels + m] = ser_P(P_i + L_m) (first byte 0 at infinity). */
void spn_ifma_label_sums(const unsigned char (*pk64)[64], size_t n, const unsigned char (*label64)[64],
                         size_t n_labels, unsigned char (*sums33)[33]);

/* ---- test entry points (field level) ---- */

enum {
    SPN_IFMA_FE_MUL = 0,  /* a·b */
    SPN_IFMA_FE_SQR = 1,  /* a² */
    SPN_IFMA_FE_INV = 2,  /* a^(p-2) (0 for 0) */
    SPN_IFMA_FE_SQRT = 3, /* a^((p+1)/4): the square root when a is a square */
    SPN_IFMA_FE_ADD = 4,  /* a + b */
    SPN_IFMA_FE_SUB = 5,  /* a − b */
    SPN_IFMA_FE_NEG = 6,  /* −a */
    SPN_IFMA_FE_MUL21 = 7, /* 21·a */
};

/* out32[i] = op(a_i, b_i) mod p, big-endian and fully reduced, for the 8 lanes. The inputs are
 * raw limbs (lane i, limb j at [i·5 + j], radix 2^52) that must each be < 2^52: the values may be
 * anything below 2^260, so unreduced inputs (≥ p) are tested too. For SUB and NEG, b (resp. a)
 * must be below 2^256 + 2^208 (the bound every mul and normalisation keeps). Needs spn_ifma_cpu(). */
void spn_ifma_fe_test(int op, const uint64_t a[40], const uint64_t b[40], unsigned char out32[8][32]);

/* ---- timing (dudect-style constant-time checks) ---- */

enum {
    SPN_IFMA_TIME_ECDH = 0,    /* input: 32-byte scan key; its recoding and b·T_i for the 8 points pt64 */
    SPN_IFMA_TIME_SPEND = 1,   /* input: 8 × 32-byte t_i; pt64[0] + t_i·G */
    SPN_IFMA_TIME_CONTROL = 2, /* input: 32-byte x; the variable-time Jacobi symbol (must show a leak) */
    SPN_IFMA_TIME_LANES = 3,   /* input: 8 × 32-byte k_i; k_i·T_i (per-lane recoding, as a block scan) */
};

/* cycles[i] = TSC cycles of operation op on input i (fenced rdtscp around each call). */
void spn_ifma_time(int op, const unsigned char *in, size_t n, const unsigned char (*pt64)[64], uint64_t *cycles);

#endif
