/* The 8-lane AVX-512 IFMA engine: CPU detection and field-level test entry points. */
#include "core_ifma.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPN_HAVE_IFMA 1
#include <cpuid.h>

#include "core_ifma_field.h"

int spn_ifma_cpu(void) {
    unsigned a, b, c, d, xcr0_lo, xcr0_hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 0;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    /* SSE and AVX state (bits 1, 2), opmask, ZMM0-15 upper halves and ZMM16-31 (bits 5, 6, 7). */
    if ((xcr0_lo & 0xE6) != 0xE6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned need = (1u << 16) | (1u << 17) | (1u << 21) | (1u << 30) | (1u << 31); /* F DQ IFMA BW VL */
    return (b & need) == need;
}

/* Lane-major raw limbs (lane i, limb j at [5i + j]) into an fe8. */
SPN_IFMA_TARGET static void load_raw(fe8 *r, const uint64_t raw[40]) {
    uint64_t t[5][8];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 5; j++) t[j][i] = raw[5 * i + j];
    for (int j = 0; j < 5; j++) r->l[j] = _mm512_loadu_si512(t[j]);
}

SPN_IFMA_TARGET void spn_ifma_fe_test(int op, const uint64_t a[40], const uint64_t b[40], unsigned char out32[8][32]) {
    fe8 x, y, r;
    uint64_t w[4][8];
    load_raw(&x, a);
    load_raw(&y, b);
    switch (op) {
    case SPN_IFMA_FE_MUL: fe8_mul(&r, &x, &y); break;
    case SPN_IFMA_FE_SQR: fe8_sqr(&r, &x); break;
    case SPN_IFMA_FE_INV: fe8_inv(&r, &x); break;
    case SPN_IFMA_FE_SQRT: fe8_sqrt(&r, &x); break;
    case SPN_IFMA_FE_ADD:
        for (int i = 0; i < 5; i++) r.l[i] = _mm512_add_epi64(x.l[i], y.l[i]);
        break;
    case SPN_IFMA_FE_SUB: fe8_sub(&r, &x, &y, 2); break;
    case SPN_IFMA_FE_NEG: fe8_neg(&r, &x, 2); break;
    default: fe8_mul_small(&r, &x, 21); break;
    }
    fe8_normw(&r);
    fe8_canon(&r, &r);
    fe8_to_words(w, &r);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 8; k++) out32[i][31 - 8 * j - k] = (unsigned char)(w[j][i] >> (8 * k));
}

#else

int spn_ifma_cpu(void) { return 0; }

void spn_ifma_fe_test(int op, const uint64_t a[40], const uint64_t b[40], unsigned char out32[8][32]) {
    (void)op;
    (void)a;
    (void)b;
    memset(out32, 0, 8 * 32);
}

#endif
