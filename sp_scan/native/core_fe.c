/* "Is x a secp256k1 x-coordinate?" without a square root: x < p and the Jacobi symbol
 * (x³+7 | p) is 1 (x³+7 is never 0 mod p: -7 is not a cube). Variable time: public keys only.
 *
 * The symbol comes from Bernstein–Yang division steps in their all-positive form: with f odd,
 *   g odd, δ > 0:  (δ, f, g) -> (1-δ, g, (g+f)/2)
 *   g odd, δ ≤ 0:  (δ, f, g) -> (1+δ, f, (g+f)/2)
 *   g even:        (δ, f, g) -> (1+δ, f, g/2)
 * f and g stay non-negative, so J(g|f) is tracked exactly: the swap flips it when f ≡ g ≡ 3
 * mod 4 (reciprocity), g+f keeps it, each halving flips it when f ≡ ±3 mod 8. It is known once
 * f = 1 or g = 1. The next 62 steps depend only on δ and the low 64 bits of f and g (3 bits stay
 * exact for the last step's mod-8 test), so they run on one word each and yield a matrix with
 * entries ≤ 2^62 that is applied to the full numbers once. */
#include "core.h"

typedef unsigned __int128 u128;

enum { BATCH = 62, MAX_BATCHES = 24 }; /* 2^20 random x never needed more than 14 batches */

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
    uint64_t w[8] = {0};
    for (int i = 0; i < 4; i++) {
        u128 acc = 0;
        for (int j = 0; j < 4; j++) {
            acc += (u128)a[i] * b[j] + w[i + j];
            w[i + j] = (uint64_t)acc;
            acc >>= 64;
        }
        w[i + 4] = (uint64_t)acc;
    }
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

/* 62 steps on the low words of f and g. Returns the matrix (u v; q r) with
 * 2^62·(f', g') = (u·f + v·g, q·f + r·g); updates δ and the flip bit. */
static void steps62(uint64_t f, uint64_t g, int *delta, unsigned *flip, uint64_t m[4]) {
    uint64_t u = 1, v = 0, q = 0, r = 1;
    int d = *delta, left = BATCH;
    unsigned j = *flip;
    for (;;) {
        /* halve g through its trailing zeros (at most `left` of them) */
        int z = __builtin_ctzll(g | (1ULL << left));
        g >>= z;
        u <<= z;
        v <<= z;
        d += z;
        left -= z;
        j ^= (unsigned)z & (unsigned)((f ^ (f >> 1)) >> 1);
        if (left == 0) break;
        if (d > 0) {
            uint64_t t = f;
            f = g;
            g = t;
            t = u;
            u = q;
            q = t;
            t = v;
            v = r;
            r = t;
            d = -d;
            j ^= (unsigned)((f & g) >> 1);
        }
        g = (g + f) >> 1; /* the carry out of bit 63 is lost: only low bits are exact anyway */
        q += u;
        r += v;
        u <<= 1;
        v <<= 1;
        d++;
        left--;
        j ^= (unsigned)((f ^ (f >> 1)) >> 1);
    }
    *delta = d;
    *flip = j & 1;
    m[0] = u;
    m[1] = v;
    m[2] = q;
    m[3] = r;
}

/* out = (a·x + b·y) / 2^62 over n limbs; exact, and the result fits in n limbs. */
static void combine(uint64_t *out, uint64_t a, const uint64_t *x, uint64_t b, const uint64_t *y, int n) {
    u128 acc = (u128)a * x[0] + (u128)b * y[0];
    uint64_t low = (uint64_t)acc;
    acc >>= 64;
    for (int i = 1; i < n; i++) {
        acc += (u128)a * x[i] + (u128)b * y[i];
        out[i - 1] = (low >> BATCH) | ((uint64_t)acc << (64 - BATCH));
        low = (uint64_t)acc;
        acc >>= 64;
    }
    out[n - 1] = (low >> BATCH) | ((uint64_t)acc << (64 - BATCH));
}

static int is_one(const uint64_t *a, int n) {
    if (a[0] != 1) return 0;
    for (int i = 1; i < n; i++)
        if (a[i]) return 0;
    return 1;
}

/* J(g|p) for g < 2^256: 1 or -1; 0 when undecided (g ≡ 0 mod p, or too many steps). */
static int jacobi_p(const uint64_t g_in[4]) {
    uint64_t f[4], g[4], m[4], nf[4], ng[4];
    int n = 4, delta = 1;
    unsigned flip = 0;
    memcpy(f, P, sizeof f);
    memcpy(g, g_in, sizeof g);
    for (int b = 0; b < MAX_BATCHES; b++) {
        if (is_one(f, n) || is_one(g, n)) return flip ? -1 : 1;
        steps62(f[0], g[0], &delta, &flip, m);
        combine(nf, m[0], f, m[1], g, n);
        combine(ng, m[2], f, m[3], g, n);
        memcpy(f, nf, (size_t)n * sizeof *f);
        memcpy(g, ng, (size_t)n * sizeof *g);
        while (n > 1 && f[n - 1] == 0 && g[n - 1] == 0) n--;
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
