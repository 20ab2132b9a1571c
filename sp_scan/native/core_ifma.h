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

#endif
