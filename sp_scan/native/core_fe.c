/* "Is x a secp256k1 x-coordinate?" without a square root: x < p and the Jacobi symbol
 * (x³+7 | p) is 1 (x³+7 is never 0 mod p: -7 is not a cube). Variable time: public keys only.
 *
 * The symbol comes from the binary GCD on a odd, b ≥ 0 (a = p, b = x³+7 to start):
 *   b even:  b -> b/2             flips J(b|a) when a ≡ ±3 mod 8
 *   b odd:   if b < a swap them   flips it when a ≡ b ≡ 3 mod 4 (reciprocity)
 *            then b -> b - a      keeps it
 * until b = 0, when a is the gcd (1, so the tracked sign is the answer). Up to 62 halvings run
 * on one word per number: the low 64 bits (exact; 3 bits still exact at the last halving) and
 * the top 63 bits at a common scale, with error bounds, so every comparison made is certain and
 * an uncertain one ends the batch early. The batch yields a matrix applied to the full numbers
 * once; numbers that fit one word finish exactly. About 180 subtractions and 6 batches for a
 * random x, against 376 steps and 12 batches for the all-positive division steps used before. */
#include "core.h"

typedef unsigned __int128 u128;

enum { BATCH = 62, MAX_BATCHES = 24 }; /* 2·10^6 test x never needed more than 6 batches */

/* p = 2^256 - C, little-endian 64-bit limbs. */
static const uint64_t P[4] = {0xFFFFFFFEFFFFFC2FULL, ~0ULL, ~0ULL, ~0ULL};
static const uint64_t C = 0x1000003D1ULL;

static void load_be32(uint64_t a[4], const unsigned char b32[32]) {
    for (int i = 0; i < 4; i++) {
        uint64_t w = 0;
        for (int k = 0; k < 8; k++) w = (w << 8) | b32[(3 - i) * 8 + k];
        a[i] = w;
    }
}

static int less_than_p(const uint64_t a[4]) {
    for (int i = 3; i >= 0; i--)
        if (a[i] != P[i]) return a[i] < P[i];
    return 0;
}

/* r ≡ a + t·2^256 (mod p), r < 2^256, for t < 2^35. */
static void fold(uint64_t r[4], const uint64_t a[4], uint64_t t) {
    u128 acc = (u128)t * C;
    for (int i = 0; i < 4; i++) {
        acc += a[i];
        r[i] = (uint64_t)acc;
        acc >>= 64;
    }
    /* A carry out (0 or 1) means the sum wrapped past 2^256 and is now < 2^68: adding its
     * 2^256 ≡ C back cannot carry again. Done unconditionally, so there is no rare branch. */
    acc = (u128)(uint64_t)acc * C;
    for (int i = 0; i < 4; i++) {
        acc += r[i];
        r[i] = (uint64_t)acc;
        acc >>= 64;
    }
}

/* r ≡ a·b (mod p), r < 2^256 (not fully reduced). */
static void mul(uint64_t r[4], const uint64_t a[4], const uint64_t b[4]) {
    uint64_t w[8];
    spn_mul_256(w, a, b);
    /* w = lo + hi·2^256 ≡ lo + hi·C: hi·C < 2^290, the sum < 2^291 */
    uint64_t lo[4];
    u128 acc = 0;
    for (int i = 0; i < 4; i++) {
        acc += (u128)w[i + 4] * C + w[i];
        lo[i] = (uint64_t)acc;
        acc >>= 64;
    }
    fold(r, lo, (uint64_t)acc);
}

/* J(b|a) for odd a and any b, both < 2^64, times (-1)^flip: 1 or -1; 0 when gcd(a, b) > 1. */
static int jacobi_u64(uint64_t a, uint64_t b, unsigned flip) {
    while (b) {
        int z = __builtin_ctzll(b);
        b >>= z;
        flip ^= (unsigned)z & (unsigned)((a ^ (a >> 1)) >> 1);
        if (b < a) {
            uint64_t t = a;
            a = b;
            b = t;
            flip ^= (unsigned)((a & b) >> 1);
        }
        b -= a;
    }
    if (a != 1) return 0;
    return (flip & 1) ? -1 : 1;
}

/* Up to BATCH halvings of the binary algorithm on (a, b) seen through their low words al, bl
 * (exact mod 2^64) and their tops ah, bh: a/2^s ∈ [ah, ah + 1], the same for b, both < 2^63.
 * The tops carry error bounds ea, eb, so every comparison made is certain; at an uncertain one
 * the batch stops early. Returns k, the halvings done, with the matrix m = (ua va; ub vb):
 * 2^k·(a', b') = (ua·a + va·b, ub·a + vb·b), |ua| + |va| ≤ 2^k and the same for the b row. */
static int steps_binary(uint64_t al, uint64_t bl, uint64_t ah, uint64_t bh, unsigned *flip, int64_t m[4]) {
    int64_t ua = 1, va = 0, ub = 0, vb = 1;
    uint64_t ea = 1, eb = 1;
    int left = BATCH;
    unsigned j = *flip;
    for (;;) {
        /* halve b through its trailing zeros (at most `left` of them) */
        int z = __builtin_ctzll(bl | (1ULL << left));
        bl >>= z;
        bh >>= z;
        eb = ((eb + (1ULL << z) - 1) >> z) + (z != 0);
        ua *= (int64_t)1 << z;
        va *= (int64_t)1 << z;
        left -= z;
        j ^= (unsigned)z & (unsigned)((al ^ (al >> 1)) >> 1);
        if (left == 0) break;
        /* b odd: make b the larger one, then b -= a */
        if (bh > ah + ea) {
        } else if (ah > bh + eb) {
            uint64_t t = al;
            al = bl;
            bl = t;
            t = ah;
            ah = bh;
            bh = t;
            t = ea;
            ea = eb;
            eb = t;
            int64_t s = ua;
            ua = ub;
            ub = s;
            s = va;
            va = vb;
            vb = s;
            j ^= (unsigned)((al & bl) >> 1);
        } else {
            break;
        }
        bl -= al;
        bh -= ah + ea;
        eb += ea;
        ub -= ua;
        vb -= va;
    }
    *flip = j & 1;
    m[0] = ua;
    m[1] = va;
    m[2] = ub;
    m[3] = vb;
    return BATCH - left;
}

/* out = (a·x + b·y) / 2^k over n limbs; exact, non-negative, and it fits in n limbs. */
static void combine(uint64_t *out, int64_t a, const uint64_t *x, int64_t b, const uint64_t *y, int n, int k) {
    typedef __int128 i128;
    i128 acc = (i128)a * (i128)x[0] + (i128)b * (i128)y[0];
    uint64_t low = (uint64_t)acc;
    acc >>= 64;
    for (int i = 1; i < n; i++) {
        acc += (i128)a * (i128)x[i] + (i128)b * (i128)y[i];
        out[i - 1] = (low >> k) | (k ? (uint64_t)acc << (64 - k) : 0);
        low = (uint64_t)acc;
        acc >>= 64;
    }
    out[n - 1] = (low >> k) | (k ? (uint64_t)acc << (64 - k) : 0);
}

/* floor(x / 2^s) for 0 < s < 64·n. */
static uint64_t shifted(const uint64_t *x, int n, int s) {
    int w = s / 64, r = s % 64;
    uint64_t lo = x[w] >> r;
    if (r && w + 1 < n) lo |= x[w + 1] << (64 - r);
    return lo;
}

/* b odd: order a ≤ b (swapping with reciprocity), then b -= a; over n limbs. */
static void exact_step(uint64_t *a, uint64_t *b, int n, unsigned *flip) {
    int i = n - 1;
    while (i > 0 && a[i] == b[i]) i--;
    if (b[i] < a[i]) {
        for (int t = 0; t < n; t++) {
            uint64_t w = a[t];
            a[t] = b[t];
            b[t] = w;
        }
        *flip ^= (unsigned)((a[0] & b[0]) >> 1) & 1;
    }
    u128 borrow = 0;
    for (int t = 0; t < n; t++) {
        u128 d = (u128)b[t] - a[t] - borrow;
        b[t] = (uint64_t)d;
        borrow = (d >> 64) & 1;
    }
}

/* J(g|p) for g < 2^256: 1 or -1; 0 when undecided (g ≡ 0 mod p, or too many batches). */
static int jacobi_p(const uint64_t g_in[4]) {
    uint64_t a[4], b[4], na[4], nb[4];
    int64_t m[4];
    int n = 4;
    unsigned flip = 0;
    memcpy(a, P, sizeof a);
    memcpy(b, g_in, sizeof b);
    for (int i = 0; i < MAX_BATCHES; i++) {
        while (n > 1 && a[n - 1] == 0 && b[n - 1] == 0) n--;
        if (n == 1) return jacobi_u64(a[0], b[0], flip);
        int s = 64 * (n - 1) + 64 - __builtin_clzll(a[n - 1] | b[n - 1]) - 63;
        int k = steps_binary(a[0], b[0], shifted(a, n, s), shifted(b, n, s), &flip, m);
        if (k == 0) { /* b odd and a, b too close for the tops: one exact step */
            exact_step(a, b, n, &flip);
            continue;
        }
        combine(na, m[0], a, m[1], b, n, k);
        combine(nb, m[2], a, m[3], b, n, k);
        memcpy(a, na, (size_t)n * sizeof *a);
        memcpy(b, nb, (size_t)n * sizeof *b);
    }
    return 0;
}

int spn_is_x_var(const unsigned char x32[32]) {
    uint64_t x[4], y[4];
    static const uint64_t seven[4] = {7, 0, 0, 0};
    load_be32(x, x32);
    if (!less_than_p(x)) return 0;
    mul(y, x, x);
    mul(y, y, x);
    uint64_t s[4];
    u128 acc = 0;
    for (int i = 0; i < 4; i++) {
        acc += (u128)y[i] + seven[i];
        s[i] = (uint64_t)acc;
        acc >>= 64;
    }
    fold(y, s, (uint64_t)acc);
    int j = jacobi_p(y);
    return j == 0 ? -1 : j > 0;
}

int spn_valid_x(const unsigned char x32[32]) {
    int r = spn_is_x_var(x32);
    if (r >= 0) return r;
    secp256k1_pubkey unused;
    return spn_lift_x(spn_ctx.public, &unused, x32);
}
