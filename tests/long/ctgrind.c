/* Valgrind memcheck as a constant-time checker for an EC core built alone (no Python, no libsecp256k1:
 * the scalar core, or the AVX2 one, which Valgrind runs), as libsecp256k1's ctime_tests do: the secrets
 * are marked undefined, so memcheck reports every branch and every memory address that depends on them.
 * Run by tests/long/ec_ctgrind.py: `ctgrind control | scalar | avx2`. */
#include <stdio.h>
#include <string.h>
#include <valgrind/memcheck.h>

#include "core_ec.h"

enum { N = 8 };

/* The control the check must flag: a branch and a table index that depend on a secret byte. */
static int control(void) {
    static const unsigned char table[256] = {1, 2, 3};
    unsigned char secret[1] = {0x42};
    VALGRIND_MAKE_MEM_UNDEFINED(secret, 1);
    int r = table[secret[0]];
    if (secret[0] & 1) r++;
    VALGRIND_MAKE_MEM_DEFINED(&r, sizeof r);
    printf("control done: %d\n", r);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "control") == 0) return control();
#ifdef CTGRIND_AVX2
    const spn_ec_core *c = &spn_ec_avx2;
#else
    const spn_ec_core *c = &spn_ec_scalar;
#endif
    unsigned char pt[N][64], pk[N][64], out33[N][33], t32[N][32], s32[N][32], b32[32];
    uint64_t b[4];
    spn_glv glv;
    if (!c->start()) return 2;
    /* Public points: i·G + G for i = 1..N, from the core itself. */
    static const uint64_t g[8] = {0x59F2815B16F81798ULL, 0x029BFCDB2DCE28D9ULL, 0x55A06295CE870B07ULL,
                                  0x79BE667EF9DCBBACULL, 0x9C47D08FFB10D4B8ULL, 0xFD17B448A6855419ULL,
                                  0x5DA4FBFC0E1108A8ULL, 0x483ADA7726A3C465ULL};
    unsigned char g64[64];
    memcpy(g64, g, 64);
    for (int i = 0; i < N; i++) {
        memset(t32[i], 0, 32);
        t32[i][31] = (unsigned char)(i + 1);
    }
    c->spend_points(g64, (const unsigned char(*)[32])t32, N, pt, out33);
    for (int i = 0; i < 32; i++) b32[i] = (unsigned char)(0x5A ^ (i * 29));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 32; j++) {
            t32[i][j] = (unsigned char)(i * 41 + j * 7 + 3);
            s32[i][j] = (unsigned char)(i * 13 + j * 5 + 1);
        }

    /* b·T with the scan key's recoding: b secret. */
    VALGRIND_MAKE_MEM_UNDEFINED(b32, sizeof b32);
    spn_scalar_from_b32(b, b32);
    spn_glv_recode(&glv, b);
    c->shared_secrets(&glv, b, (const unsigned char(*)[64])pt, NULL, N, out33, NULL);
    VALGRIND_MAKE_MEM_DEFINED(out33, sizeof out33);
    printf("b·T done: %02x\n", out33[0][0]);

    /* (b·s_i)·T_i, as the block scan does: b secret, s_i public. */
    c->shared_secrets(NULL, b, (const unsigned char(*)[64])pt, (const unsigned char(*)[32])s32, N, out33, NULL);
    VALGRIND_MAKE_MEM_DEFINED(out33, sizeof out33);
    printf("k_i·T_i done: %02x\n", out33[0][0]);

    /* B + t_i·G: t_i secret. */
    VALGRIND_MAKE_MEM_UNDEFINED(t32, sizeof t32);
    c->spend_points(pt[0], (const unsigned char(*)[32])t32, N, pk, out33);
    VALGRIND_MAKE_MEM_DEFINED(out33, sizeof out33);
    VALGRIND_MAKE_MEM_DEFINED(pk, sizeof pk);
    printf("B + t·G done: %02x\n", out33[0][0]);

    /* The tests' field entry on secret inputs: inversion and square root (parse's) included. */
    uint64_t fa[10], fb[10], top = (1ULL << c->raw_bits) - 1;
    unsigned char f32[1][32];
    for (int op = SPN_FE_MUL; op <= SPN_FE_MUL21; op++) {
        memset(fa, 0, sizeof fa);
        memset(fb, 0, sizeof fb);
        for (int j = 0; j < c->raw_limbs; j++) fa[j] = fb[j] = (0x0123456789ABCULL * (uint64_t)(j + op + 1)) & top;
        VALGRIND_MAKE_MEM_UNDEFINED(fa, sizeof fa);
        VALGRIND_MAKE_MEM_UNDEFINED(fb, sizeof fb);
        c->fe_test(op, fa, fb, 1, f32);
        VALGRIND_MAKE_MEM_DEFINED(f32, sizeof f32);
    }
    printf("field operations done: %02x\n", f32[0][0]);
    return 0;
}
