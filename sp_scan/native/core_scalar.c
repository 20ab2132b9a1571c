/* Scalars mod n: for the EC engines multiplication, the GLV split k = k1 + k2·λ and the
 * signed-digit recodings the ladders consume; for sending and BIP374 proofs the addition and
 * reduction of 32-byte scalars. Plain C, constant time: fixed loops, no branch or memory index
 * depends on a scalar (the results are masks and arithmetic, never `if`). */
#include <string.h>

#include "core_ec.h"

typedef unsigned __int128 u128;

/* n and 2^256 − n, little-endian 64-bit words. */
const uint64_t spn_scalar_n[4] = {0xBFD25E8CD0364141ULL, 0xBAAEDCE6AF48A03BULL, 0xFFFFFFFFFFFFFFFEULL,
                                0xFFFFFFFFFFFFFFFFULL};
static const uint64_t NC[3] = {0x402DA1732FC9BEBFULL, 0x4551231950B75FC4ULL, 1};
/* The GLV constants of secp256k1 (derived from the short lattice basis of n and λ): λ with
 * λ³ = 1 mod n (λ·(x, y) = (β·x, y)), g1 = round(2^384·b2/n), g2 = round(−2^384·b1/n), −b1, −b2, −λ. */
static const uint64_t G1[4] = {0xE893209A45DBB031ULL, 0x3DAA8A1471E8CA7FULL, 0xE86C90E49284EB15ULL, 0x3086D221A7D46BCDULL};
static const uint64_t G2[4] = {0x1571B4AE8AC47F71ULL, 0x221208AC9DF506C6ULL, 0x6F547FA90ABFE4C4ULL, 0xE4437ED6010E8828ULL};
static const uint64_t MINUS_B1[4] = {0x6F547FA90ABFE4C3ULL, 0xE4437ED6010E8828ULL, 0, 0};
static const uint64_t MINUS_B2[4] = {0xD765CDA83DB1562CULL, 0x8A280AC50774346DULL, 0xFFFFFFFFFFFFFFFEULL, 0xFFFFFFFFFFFFFFFFULL};
static const uint64_t MINUS_LAMBDA[4] = {0xE0CFC810B51283CFULL, 0xA880B9FC8EC739C2ULL, 0x5AD9E3FD77ED9BA4ULL,
                                         0xAC9C52B33FA3CF1FULL};

void spn_scalar_from_b32(uint64_t r[4], const unsigned char b32[32]) {
    for (int i = 0; i < 4; i++) {
        uint64_t w = 0;
        for (int k = 0; k < 8; k++) w = (w << 8) | b32[(3 - i) * 8 + k];
        r[i] = w;
    }
}

void spn_mul_256(uint64_t w[8], const uint64_t a[4], const uint64_t b[4]) {
    memset(w, 0, 8 * sizeof *w);
    for (int i = 0; i < 4; i++) {
        u128 acc = 0;
        for (int j = 0; j < 4; j++) {
            acc += (u128)a[i] * b[j] + w[i + j];
            w[i + j] = (uint64_t)acc;
            acc >>= 64;
        }
        w[i + 4] = (uint64_t)acc;
    }
}

/* out[0..n_out) = lo[0..n_lo) + hi[0..n_hi)·(2^256 − n), with the carries; the caller sizes n_out. */
static void fold(uint64_t *out, int n_out, const uint64_t *lo, int n_lo, const uint64_t *hi, int n_hi) {
    for (int k = 0; k < n_out; k++) out[k] = k < n_lo ? lo[k] : 0;
    for (int i = 0; i < n_hi; i++) {
        u128 acc = 0;
        for (int j = 0; i + j < n_out; j++) {
            acc += (u128)out[i + j] + (j < 3 ? (u128)hi[i] * NC[j] : 0);
            out[i + j] = (uint64_t)acc;
            acc >>= 64;
        }
    }
}

/* r = x mod n for x = r[0..3] + top·2^256 with x < 2n (one conditional subtraction). */
static void reduce_once(uint64_t r[4], uint64_t top) {
    uint64_t t[4];
    u128 acc = 0;
    for (int i = 0; i < 4; i++) { /* t = r + (2^256 − n) = x − n + 2^256 */
        acc += (u128)r[i] + (i < 3 ? NC[i] : 0);
        t[i] = (uint64_t)acc;
        acc >>= 64;
    }
    uint64_t take = 0 - ((uint64_t)acc | top); /* x ≥ n: all ones */
    for (int i = 0; i < 4; i++) r[i] = (t[i] & take) | (r[i] & ~take);
    spn_cleanse(t, sizeof t);
}

void spn_scalar_mul(uint64_t r[4], const uint64_t a[4], const uint64_t b[4]) {
    uint64_t w[8], m[7], s[5];
    spn_mul_256(w, a, b);
    fold(m, 7, w, 4, w + 4, 4);   /* < 2^256 + 2^385: 7 words */
    fold(s, 5, m, 4, m + 4, 3);   /* high part < 2^130, times 2^256 − n < 2^259: < 2^260 */
    uint64_t f[5];
    fold(f, 5, s, 4, s + 4, 1);   /* s[4] < 2^5: < 2^256 + 2^134 */
    memcpy(r, f, 4 * sizeof *r);
    reduce_once(r, f[4]);
    spn_cleanse(w, sizeof w);
    spn_cleanse(m, sizeof m);
    spn_cleanse(s, sizeof s);
    spn_cleanse(f, sizeof f);
}

static void scalar_add(uint64_t r[4], const uint64_t a[4], const uint64_t b[4]) {
    u128 acc = 0;
    for (int i = 0; i < 4; i++) {
        acc += (u128)a[i] + b[i];
        r[i] = (uint64_t)acc;
        acc >>= 64;
    }
    reduce_once(r, (uint64_t)acc);
}

static void scalar_to_b32(unsigned char b32[32], const uint64_t r[4]) {
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 8; k++) b32[(3 - i) * 8 + k] = (unsigned char)(r[i] >> (56 - 8 * k));
}

void spn_scalar_add(unsigned char r32[32], const unsigned char a32[32], const unsigned char b32[32]) {
    uint64_t a[4], b[4], s[4];
    spn_scalar_from_b32(a, a32);
    spn_scalar_from_b32(b, b32);
    scalar_add(s, a, b);
    scalar_to_b32(r32, s);
    spn_cleanse(a, sizeof a);
    spn_cleanse(b, sizeof b);
    spn_cleanse(s, sizeof s);
}

void spn_scalar_reduce(unsigned char r32[32], const unsigned char x32[32]) {
    uint64_t x[4];
    spn_scalar_from_b32(x, x32);
    reduce_once(x, 0); /* x < 2^256 < 2n */
    scalar_to_b32(r32, x);
    spn_cleanse(x, sizeof x);
}

/* round(k·g / 2^384) for k < n, g < 2^256: below 2^128 (k·g < 2^512 − 2^384), two words. */
static void mul_shift_384(uint64_t r[2], const uint64_t k[4], const uint64_t g[4]) {
    uint64_t w[8];
    spn_mul_256(w, k, g);
    u128 acc = (u128)w[6] + (w[5] >> 63);
    r[0] = (uint64_t)acc;
    r[1] = w[7] + (uint64_t)(acc >> 64);
    spn_cleanse(w, sizeof w);
}

/* r read as a value in (−n/2, n/2]: returns 1 and sets r = n − r when r > (n−1)/2, else 0. */
static unsigned abs_signed(uint64_t r[4]) {
    static const uint64_t HALF[4] = {0xDFE92F46681B20A0ULL, 0x5D576E7357A4501DULL, 0xFFFFFFFFFFFFFFFFULL,
                                     0x7FFFFFFFFFFFFFFFULL};
    uint64_t borrow = 0, t[4];
    for (int i = 0; i < 4; i++) {
        u128 d = (u128)HALF[i] - r[i] - borrow;
        borrow = (uint64_t)(d >> 64) & 1;
    }
    uint64_t neg = 0 - borrow;
    borrow = 0;
    for (int i = 0; i < 4; i++) {
        u128 d = (u128)spn_scalar_n[i] - r[i] - borrow;
        t[i] = (uint64_t)d;
        borrow = (uint64_t)(d >> 64) & 1;
    }
    for (int i = 0; i < 4; i++) r[i] = (t[i] & neg) | (r[i] & ~neg);
    spn_cleanse(t, sizeof t);
    return (unsigned)(neg & 1);
}

/* Signed base-2^5 digits of k < 2^129, least significant first, each in [−15, 16]: chunk plus the
 * carry in, minus 32 (carry out 1) when that exceeds 16. 26 digits cover 130 bits, so the last
 * carry out is 0. */
static void recode_signed(int8_t d[SPN_GLV_WIN], const uint64_t k[4]) {
    uint64_t carry = 0;
    for (int i = 0; i < SPN_GLV_WIN; i++) {
        int bit = SPN_GLV_W * i, word = bit / 64, sh = bit % 64;
        uint64_t chunk = k[word] >> sh;
        if (sh > 64 - SPN_GLV_W && word < 3) chunk |= k[word + 1] << (64 - sh); /* public: i only */
        chunk &= (1u << SPN_GLV_W) - 1;
        uint64_t v = chunk + carry;
        carry = (v + (1u << (SPN_GLV_W - 1)) - 1) >> SPN_GLV_W;
        d[i] = (int8_t)((int64_t)v - (int64_t)(carry << SPN_GLV_W));
    }
}

/* The GLV split of k < n: k ≡ k1 + k2·λ, k1 and k2 as values mod n (each near 0 or near n). */
static void glv_split(uint64_t r1[4], uint64_t r2[4], const uint64_t k[4]) {
    uint64_t c1[4] = {0}, c2[4] = {0};
    mul_shift_384(c1, k, G1);
    mul_shift_384(c2, k, G2);
    spn_scalar_mul(c1, c1, MINUS_B1);
    spn_scalar_mul(c2, c2, MINUS_B2);
    scalar_add(r2, c1, c2);          /* k2 */
    spn_scalar_mul(r1, r2, MINUS_LAMBDA);
    scalar_add(r1, r1, k);           /* k1 = k − k2·λ */
    spn_cleanse(c1, sizeof c1);
    spn_cleanse(c2, sizeof c2);
}

void spn_glv_recode(spn_glv *out, const uint64_t k[4]) {
    spn_glv_recode_digits(out, k);
    spn_glv_recode_odd(out, k);
}

void spn_glv_recode_digits(spn_glv *out, const uint64_t k[4]) {
    uint64_t r1[4], r2[4];
    glv_split(r1, r2, k);
    out->neg[0] = (uint8_t)abs_signed(r1);
    out->neg[1] = (uint8_t)abs_signed(r2);
    recode_signed(out->d[0], r1);
    recode_signed(out->d[1], r2);
    spn_cleanse(r1, sizeof r1);
    spn_cleanse(r2, sizeof r2);
}

/* −(1 + λ) and 1/2 mod n. */
static const uint64_t MINUS_ONE_LAMBDA[4] = {0xE0CFC810B51283CEULL, 0xA880B9FC8EC739C2ULL, 0x5AD9E3FD77ED9BA4ULL,
                                             0xAC9C52B33FA3CF1FULL};
static const uint64_t HALF_MOD_N[4] = {0xDFE92F46681B20A1ULL, 0x5D576E7357A4501DULL, 0xFFFFFFFFFFFFFFFFULL,
                                       0x7FFFFFFFFFFFFFFFULL};

/* For v = 2^129 + s_h with s_h the signed half (|s_h| < 2^129): the 130 bits of v, taken as signs
 * ±1 (bit 1 / bit 0), sum to 2v − (2^130 − 1) = 2·s_h + 1; so k ≡ Σ_h λ^h (2·s_h + 1) = 2s + 1 + λ
 * for s = (k − 1 − λ)/2 mod n, split as s ≡ s_1 + s_2·λ. A window of five such signs is the odd
 * digit 2u − 31 of its bits u. */
void spn_glv_recode_odd(spn_glv *out, const uint64_t k[4]) {
    uint64_t s[4], r[2][4], v[3];
    scalar_add(s, k, MINUS_ONE_LAMBDA);
    spn_scalar_mul(s, s, HALF_MOD_N);
    glv_split(r[0], r[1], s);
    for (int h = 0; h < 2; h++) {
        uint64_t neg = 0 - (uint64_t)abs_signed(r[h]), plus[3], minus[3];
        u128 acc = 0;
        for (int i = 0; i < 3; i++) { /* plus = 2^129 + |s_h|, minus = 2^129 − |s_h| */
            acc += (u128)r[h][i] + (i == 2 ? 2 : 0);
            plus[i] = (uint64_t)acc;
            acc >>= 64;
        }
        uint64_t borrow = 0;
        for (int i = 0; i < 3; i++) {
            u128 d = (u128)(i == 2 ? 2 : 0) - r[h][i] - borrow;
            minus[i] = (uint64_t)d;
            borrow = (uint64_t)(d >> 64) & 1;
        }
        for (int i = 0; i < 3; i++) v[i] = (minus[i] & neg) | (plus[i] & ~neg);
        for (int i = 0; i < SPN_GLV_WIN; i++) {
            int bit = SPN_GLV_W * i, word = bit / 64, sh = bit % 64;
            uint64_t chunk = v[word] >> sh;
            if (sh > 64 - SPN_GLV_W) chunk |= v[word + 1] << (64 - sh); /* public: i only */
            out->u[h][i] = (uint8_t)(chunk & ((1u << SPN_GLV_W) - 1));
        }
        spn_cleanse(plus, sizeof plus);
        spn_cleanse(minus, sizeof minus);
    }
    spn_cleanse(s, sizeof s);
    spn_cleanse(r, sizeof r);
    spn_cleanse(v, sizeof v);
}
