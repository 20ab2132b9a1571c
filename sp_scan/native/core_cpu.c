/* CPU features the engines need, from cpuid and XCR0 (the state the OS saves on context switches). */
#include "core_ec.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

/* XCR0, or 0 when the OS has not enabled XSAVE (then no AVX state is saved: no AVX engine). */
static unsigned xcr0(void) {
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return lo;
}

/* cpuid leaf 7 sub-leaf 0 ebx, or 0. */
static unsigned leaf7_ebx(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) ? b : 0;
}

int spn_has_ifma(void) {
    /* SSE and AVX state (bits 1, 2), opmask, ZMM0-15 upper halves and ZMM16-31 (bits 5, 6, 7). */
    if ((xcr0() & 0xE6) != 0xE6) return 0;
    const unsigned need = (1u << 16) | (1u << 17) | (1u << 21) | (1u << 30) | (1u << 31); /* F DQ IFMA BW VL */
    return (leaf7_ebx() & need) == need;
}

int spn_has_avx2(void) {
    if ((xcr0() & 0x6) != 0x6) return 0; /* SSE and AVX state */
    const unsigned need = (1u << 5) | (1u << 8); /* AVX2, BMI2 */
    return (leaf7_ebx() & need) == need;
}

#else

int spn_has_ifma(void) { return 0; }
int spn_has_avx2(void) { return 0; }

#endif
