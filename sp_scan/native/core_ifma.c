/* The 8-lane AVX-512 IFMA engine: CPU detection, the group law, the variable- and fixed-base
 * multiplications and the entry points the scan uses. */
#include "core_ifma.h"

#include <string.h>

#include "core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPN_HAVE_IFMA 1
#include <cpuid.h>
#include <x86intrin.h>

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

/* ---- points ----
 * Projective (X : Y : Z) with x = X/Z, y = Y/Z, infinity = (0 : 1 : 0), and the complete formulas of
 * Renes, Costello and Batina ("Complete addition formulas for prime order elliptic curves", 2016,
 * Algorithms 7, 8 and 9 for a = 0, b3 = 3·7). Complete: no input (doubling, P + (−P), infinity)
 * needs a branch, which is what lets 8 lanes run one schedule whatever their points and digits are.
 * The mixed addition is complete for any projective P and affine Q (Q is never infinity here). */
typedef struct {
    fe8 x, y, z;
} ge8;

typedef struct {
    fe8 x, y;
} gea8;

/* In: carried, m ≤ 15 each. Out: m (2, 2, 1). */
SPN_IFMA_TARGET static void ge8_dbl(ge8 *r, const ge8 *a) {
    fe8 t0, t1, t2, x3, y3, z3;
    fe8_sqr(&t0, &a->y);
    fe8_shl(&z3, &t0, 3);         /* 8·Y²        m 8 */
    fe8_mul(&t1, &a->y, &a->z);
    fe8_sqr(&t2, &a->z);
    fe8_mul_small(&t2, &t2, 21);  /* b3·Z²       m 1 */
    fe8_mul(&x3, &t2, &z3);
    fe8_add(&y3, &t0, &t2);       /*             m 2 */
    fe8_mul(&z3, &t1, &z3);
    fe8_add(&t1, &t2, &t2);
    fe8_add(&t2, &t1, &t2);       /* 3·b3·Z²     m 3 */
    fe8_sub(&t0, &t0, &t2, 4);    /* Y² − 3b3Z²  m 5 */
    fe8_mul(&y3, &t0, &y3);
    fe8_add(&y3, &x3, &y3);       /*             m 2 */
    fe8_mul(&t1, &a->x, &a->y);
    fe8_mul(&x3, &t0, &t1);
    fe8_add(&x3, &x3, &x3);       /*             m 2 */
    r->x = x3;
    r->y = y3;
    r->z = z3;
}

/* The second half of Algorithms 7 and 8, from t0 = X1X2, t1 = Y1Y2, t2 = b3·(Z1Z2), t3 = X1Y2 + Y1X2,
 * t4 = Y1Z2 + Z1Y2 and y3 = X1Z2 + Z1X2 (m ≤ 1, 1, 1, 4, 4, 4). Out: m (3, 2, 2). */
SPN_IFMA_TARGET static void ge8_add_finish(ge8 *r, fe8 *t0, fe8 *t1, const fe8 *t2, const fe8 *t3, const fe8 *t4,
                                           fe8 *y3) {
    fe8 x3, z3, u;
    fe8_add(&x3, t0, t0);
    fe8_add(t0, &x3, t0);         /* 3·X1X2  m 3 */
    fe8_add(&z3, t1, t2);         /* m 2 */
    fe8_sub(t1, t1, t2, 2);       /* m 3 */
    fe8_mul_small(y3, y3, 21);    /* 21·4 < 2^11; m 1 */
    fe8_mul(&x3, t4, y3);
    fe8_mul(&u, t3, t1);
    fe8_sub(&x3, &u, &x3, 2);     /* m 3 */
    fe8_mul(y3, y3, t0);
    fe8_mul(t1, t1, &z3);
    fe8_add(y3, t1, y3);          /* m 2 */
    fe8_mul(t0, t0, t3);
    fe8_mul(&z3, &z3, t4);
    fe8_add(&z3, &z3, t0);        /* m 2 */
    r->x = x3;
    r->y = *y3;
    r->z = z3;
}

/* In: m ≤ 3 each. Out: m (3, 2, 2). r may alias p or q. */
SPN_IFMA_TARGET static void ge8_add(ge8 *r, const ge8 *p, const ge8 *q) {
    fe8 t0, t1, t2, t3, t4, x3, y3;
    fe8_mul(&t0, &p->x, &q->x);
    fe8_mul(&t1, &p->y, &q->y);
    fe8_mul(&t2, &p->z, &q->z);
    fe8_add(&t3, &p->x, &p->y);   /* m ≤ 6 */
    fe8_add(&t4, &q->x, &q->y);
    fe8_mul(&t3, &t3, &t4);
    fe8_add(&t4, &t0, &t1);       /* m 2 */
    fe8_sub(&t3, &t3, &t4, 3);    /* X1Y2 + Y1X2  m 4 */
    fe8_add(&t4, &p->y, &p->z);
    fe8_add(&x3, &q->y, &q->z);
    fe8_mul(&t4, &t4, &x3);
    fe8_add(&x3, &t1, &t2);
    fe8_sub(&t4, &t4, &x3, 3);    /* Y1Z2 + Z1Y2  m 4 */
    fe8_add(&x3, &p->x, &p->z);
    fe8_add(&y3, &q->x, &q->z);
    fe8_mul(&x3, &x3, &y3);
    fe8_add(&y3, &t0, &t2);
    fe8_sub(&y3, &x3, &y3, 3);    /* X1Z2 + Z1X2  m 4 */
    fe8_mul_small(&t2, &t2, 21);  /* m 1 */
    ge8_add_finish(r, &t0, &t1, &t2, &t3, &t4, &y3);
}

/* r = p + q for affine q (Z2 = 1). In: p m ≤ (3, 3, 3), q m ≤ (3, 3). Out: m (3, 2, 2). */
SPN_IFMA_TARGET static void ge8_madd(ge8 *r, const ge8 *p, const gea8 *q) {
    fe8 t0, t1, t2, t3, t4, y3;
    fe8_mul(&t0, &p->x, &q->x);
    fe8_mul(&t1, &p->y, &q->y);
    fe8_add(&t3, &q->x, &q->y);
    fe8_add(&t4, &p->x, &p->y);
    fe8_mul(&t3, &t3, &t4);
    fe8_add(&t4, &t0, &t1);
    fe8_sub(&t3, &t3, &t4, 3);    /* m 4 */
    fe8_mul(&t4, &q->y, &p->z);
    fe8_add(&t4, &t4, &p->y);     /* m ≤ 4 */
    fe8_mul(&y3, &q->x, &p->z);
    fe8_add(&y3, &y3, &p->x);     /* m ≤ 4 */
    fe8_mul_small(&t2, &p->z, 21);
    ge8_add_finish(r, &t0, &t1, &t2, &t3, &t4, &y3);
}

SPN_IFMA_TARGET static void ge8_set_infinity(ge8 *r) {
    fe8_set1(&r->x, 0);
    fe8_set1(&r->y, 1);
    fe8_set1(&r->z, 0);
}

/* ---- moving points in and out ----
 * A point crosses the interface as 64 bytes: x then y, each 32 bytes little-endian (the layout of
 * libsecp256k1's secp256k1_pubkey on 64-bit builds, checked at start-up). */

/* w[j][i] = word j of the coordinate at byte `off` (0: x, 32: y) of point lane[i]. */
static void point_words(uint64_t w[4][8], const unsigned char (*pt64)[64], const size_t lane[8], int off) {
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) memcpy(&w[j][i], pt64[lane[i]] + off + 8 * j, 8);
}

SPN_IFMA_TARGET static void gea8_load(gea8 *r, const unsigned char (*pt64)[64], const size_t lane[8]) {
    uint64_t wx[4][8], wy[4][8];
    point_words(wx, pt64, lane, 0);
    point_words(wy, pt64, lane, 32);
    fe8_from_words(&r->x, wx);
    fe8_from_words(&r->y, wy);
}

/* 32-byte big-endian of lane i from canonical words. */
static void put_be32(unsigned char out32[32], const uint64_t w[4][8], int lane) {
    for (int j = 0; j < 4; j++)
        for (int k = 0; k < 8; k++) out32[31 - 8 * j - k] = (unsigned char)(w[j][lane] >> (8 * k));
}

/* ---- batched inversion: Montgomery's trick across vectors, one exponentiation for all ---- */

/* z[0..n) = 1/z[0..n) lane-wise (m 1 in, m 1 out); lanes that are 0 stay 0. */
SPN_IFMA_TARGET static void fe8_inv_many(fe8 *z, int n) {
    fe8 prefix[SPN_IFMA_GROUP], acc, one, t;
    __mmask8 zero[SPN_IFMA_GROUP];
    fe8_set1(&one, 1);
    for (int i = 0; i < n; i++) {
        zero[i] = fe8_is_zero(&z[i]);
        fe8_select(&z[i], zero[i], &z[i], &one);
        if (i == 0) acc = z[0];
        else fe8_mul(&acc, &acc, &z[i]);
        prefix[i] = acc;
    }
    fe8_inv(&acc, &acc); /* 1/(z[0]···z[n−1]) */
    for (int i = n - 1; i > 0; i--) {
        fe8_mul(&t, &acc, &prefix[i - 1]); /* 1/z[i] */
        fe8_mul(&acc, &acc, &z[i]);        /* 1/(z[0]···z[i−1]) */
        for (int l = 0; l < 5; l++) z[i].l[l] = _mm512_maskz_mov_epi64((__mmask8)~zero[i], t.l[l]);
    }
    for (int l = 0; l < 5; l++) z[0].l[l] = _mm512_maskz_mov_epi64((__mmask8)~zero[0], acc.l[l]);
}

/* Affine, canonical words of n projective points (z is overwritten); *inf: lanes at infinity. */
SPN_IFMA_TARGET static void ge8_to_affine_words(ge8 *pts, int n, uint64_t (*wx)[4][8], uint64_t (*wy)[4][8],
                                                __mmask8 *inf) {
    fe8 z[SPN_IFMA_GROUP], x, y;
    for (int v = 0; v < n; v++) {
        fe8_normw(&pts[v].z); /* m ≤ 2 -> 1 */
        inf[v] = fe8_is_zero(&pts[v].z);
        z[v] = pts[v].z;
    }
    fe8_inv_many(z, n);
    for (int v = 0; v < n; v++) {
        fe8_mul(&x, &pts[v].x, &z[v]);
        fe8_mul(&y, &pts[v].y, &z[v]);
        fe8_canon(&x, &x);
        fe8_canon(&y, &y);
        fe8_to_words(wx[v], &x);
        fe8_to_words(wy[v], &y);
    }
    spn_cleanse(z, sizeof z);
    spn_cleanse(&x, sizeof x);
    spn_cleanse(&y, sizeof y);
}

/* out33 = ser_P of lane i, or a leading 0 when bad. */
static void put_ser33(unsigned char out33[33], const uint64_t wx[4][8], const uint64_t wy[4][8], int lane, int bad) {
    out33[0] = (unsigned char)(bad ? 0 : 0x02 | (wy[0][lane] & 1));
    put_be32(out33 + 1, wx, lane);
}

static void put_pt64(unsigned char out64[64], const uint64_t wx[4][8], const uint64_t wy[4][8], int lane) {
    for (int j = 0; j < 4; j++) {
        memcpy(out64 + 8 * j, &wx[j][lane], 8);
        memcpy(out64 + 32 + 8 * j, &wy[j][lane], 8);
    }
}

/* Single stores into callers' arrays, kept out of the (uninstrumented) AVX-512 functions for ASan. */
static void put_flag(unsigned char *out, size_t i, unsigned char v) { out[i] = v; }
static void put_u64(uint64_t *out, size_t i, uint64_t v) { out[i] = v; }

/* Lane indices of vector v of a chunk of cnt items starting at base: the last item repeats. */
static void lanes_of(size_t lane[8], size_t base, size_t cnt, int v) {
    for (int i = 0; i < 8; i++) {
        size_t k = (size_t)v * 8 + (size_t)i;
        lane[i] = base + (k < cnt ? k : cnt - 1);
    }
}

/* ---- variable base: k·T with the GLV split, signed base-2^5 digits, a per-lane table ---- */

/* r = ±|d|·entry, |d| ≤ 16: every entry is read (masked blends), none is chosen by address. */
SPN_IFMA_TARGET static void ge8_lookup(ge8 *r, const ge8 tab[17], __m512i d, __mmask8 flip) {
    __m512i a = _mm512_abs_epi64(d);
    __mmask8 neg = (__mmask8)(_mm512_movepi64_mask(d) ^ flip);
    ge8 acc = tab[0];
    fe8 ny;
    for (int j = 1; j <= 16; j++) {
        __mmask8 m = _mm512_cmpeq_epi64_mask(a, v1((uint64_t)j));
        fe8_select(&acc.x, m, &acc.x, &tab[j].x);
        fe8_select(&acc.y, m, &acc.y, &tab[j].y);
        fe8_select(&acc.z, m, &acc.z, &tab[j].z);
    }
    fe8_neg(&ny, &acc.y, 3); /* table y: m ≤ 2 */
    fe8_select(&acc.y, neg, &acc.y, &ny);
    *r = acc;
}

IFMA_INLINE __m512i digits_of(const int8_t d[8]) { return _mm512_cvtepi8_epi64(_mm_loadl_epi64((const __m128i *)d)); }

/* r = k·T lane-wise, k ≡ (−1)^neg1·|k1| + (−1)^neg2·|k2|·λ with the digits d[h][w][lane] of |k1|, |k2|;
 * T affine on the curve, m ≤ 1. Wipes its table. */
SPN_IFMA_TARGET static void ecmult8(ge8 *r, const gea8 *t, __mmask8 neg1, __mmask8 neg2,
                                    const int8_t d[2][SPN_IFMA_VWIN][8]) {
    ge8 tab[17], q;
    gea8 tp = *t;
    fe8 ny, beta;
    static const uint64_t BETA[4] = {0xC1396C28719501EEULL, 0x9CF0497512F58995ULL, 0x6E64479EAC3434E9ULL,
                                     0x7AE96A2B657C0710ULL};
    uint64_t bw[4][8];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 8; i++) bw[j][i] = BETA[j];
    fe8_from_words(&beta, bw);
    fe8_neg(&ny, &tp.y, 2);
    fe8_select(&tp.y, neg1, &tp.y, &ny);
    ge8_set_infinity(&tab[0]);
    tab[1].x = tp.x;
    tab[1].y = tp.y;
    fe8_set1(&tab[1].z, 1);
    ge8_dbl(&tab[2], &tab[1]);
    for (int j = 3; j <= 16; j++) ge8_madd(&tab[j], &tab[j - 1], &tp);
    __mmask8 flip = (__mmask8)(neg1 ^ neg2);
    for (int w = SPN_IFMA_VWIN - 1; w >= 0; w--) {
        if (w == SPN_IFMA_VWIN - 1) {
            ge8_lookup(r, tab, digits_of(d[0][w]), 0);
        } else {
            for (int i = 0; i < SPN_IFMA_VW; i++) ge8_dbl(r, r);
            ge8_lookup(&q, tab, digits_of(d[0][w]), 0);
            ge8_add(r, r, &q);
        }
        ge8_lookup(&q, tab, digits_of(d[1][w]), flip);
        fe8_mul(&q.x, &q.x, &beta); /* λ·(x, y) = (β·x, y) */
        ge8_add(r, r, &q);
    }
    spn_cleanse(tab, sizeof tab);
    spn_cleanse(&q, sizeof q);
    spn_cleanse(&tp, sizeof tp);
}

/* ---- fixed base: t·G from precomputed affine multiples ----
 * t' = t, or t + n when t is even, is odd and below 2^257; its regular (all-odd) signed recoding
 * in base 2^GW (Joye–Tunstall) has GWIN digits d_i = 2u_i + 1 − 2^GW, u_i = bits GW·i+1 .. GW·i+GW
 * of t' (the last with its sign bit forced), so t'·G = Σ d_i·2^(GW·i)·G, and gen_table[i][·][j]
 * holds the limbs of (2j + 1)·2^(GW·i)·G, j = (|d_i| − 1)/2. No digit is 0, so every step is a
 * real affine addition. A lane's entry is picked inside registers (vpermt2q on the index, then
 * blends on its high bits) after loading all of the window's entries: no address depends on t. */
enum { GW = 7, GWIN = (257 + GW - 1) / GW, GENTRIES = 1 << (GW - 1) };
/* [window][limb: x0..x4, y0..y4][entry] */
static uint64_t gen_table[GWIN][10][GENTRIES] __attribute__((aligned(64)));

/* Entry idx (per lane, < GENTRIES) of one limb column of the table. */
IFMA_INLINE __m512i gen_select(const uint64_t col[GENTRIES], __m512i idx) {
    __m512i v[GENTRIES / 16];
    SPN_UNROLL
    for (int r = 0; r < GENTRIES / 16; r++)
        v[r] = _mm512_permutex2var_epi64(_mm512_load_si512(col + 16 * r), idx, _mm512_load_si512(col + 16 * r + 8));
    SPN_UNROLL
    for (int bit = 4, cnt = GENTRIES / 16; cnt > 1; bit++, cnt /= 2) {
        __mmask8 hi = _mm512_test_epi64_mask(idx, v1(1ULL << bit));
        SPN_UNROLL
        for (int r = 0; r < cnt / 2; r++) v[r] = _mm512_mask_blend_epi64(hi, v[2 * r], v[2 * r + 1]);
    }
    return v[0];
}

/* r = start + t'·G for t' in words tw[0..4] (lane-wise); start affine, m ≤ 1. */
SPN_IFMA_TARGET static void ecmult_gen8(ge8 *r, const gea8 *start, const __m512i tw[5]) {
    const __m512i half = v1(GENTRIES), mask = v1(GENTRIES - 1);
    gea8 e;
    fe8 ny;
    r->x = start->x;
    r->y = start->y;
    fe8_set1(&r->z, 1);
    for (int i = 0; i < GWIN; i++) {
        int bit = GW * i + 1, q = bit / 64, sh = bit % 64;
        __m512i u = _mm512_srlv_epi64(tw[q], v1((uint64_t)sh));
        if (sh > 64 - GW && q < 4) u = _mm512_or_si512(u, _mm512_sllv_epi64(tw[q + 1], v1((uint64_t)(64 - sh))));
        u = _mm512_and_si512(u, v1(2 * GENTRIES - 1));
        if (i == GWIN - 1) u = _mm512_or_si512(u, half);
        /* sign bit set: d = 2(u − half) + 1 > 0, entry u − half; clear: d < 0, entry half − 1 − u */
        __mmask8 neg = _mm512_testn_epi64_mask(u, half);
        __m512i idx = _mm512_and_si512(_mm512_mask_xor_epi64(u, neg, u, mask), mask);
        SPN_UNROLL
        for (int l = 0; l < 5; l++) {
            e.x.l[l] = gen_select(gen_table[i][l], idx);
            e.y.l[l] = gen_select(gen_table[i][5 + l], idx);
        }
        fe8_neg(&ny, &e.y, 2);
        fe8_select(&e.y, neg, &e.y, &ny);
        ge8_madd(r, r, &e);
    }
    spn_cleanse(&e, sizeof e);
    spn_cleanse(&ny, sizeof ny);
}

/* ---- start-up: the layout check and the generator table (libsecp256k1 computes it) ---- */

static const unsigned char GX_BE[32] = {0x79, 0xBE, 0x66, 0x7E, 0xF9, 0xDC, 0xBB, 0xAC, 0x55, 0xA0, 0x62,
                                        0x95, 0xCE, 0x87, 0x0B, 0x07, 0x02, 0x9B, 0xFC, 0xDB, 0x2D, 0xCE,
                                        0x28, 0xD9, 0x59, 0xF2, 0x81, 0x5B, 0x16, 0xF8, 0x17, 0x98};
static const unsigned char GY_BE[32] = {0x48, 0x3A, 0xDA, 0x77, 0x26, 0xA3, 0xC4, 0x65, 0x5D, 0xA4, 0xFB,
                                        0xFC, 0x0E, 0x11, 0x08, 0xA8, 0xFD, 0x17, 0xB4, 0x48, 0xA6, 0x85,
                                        0x54, 0x19, 0x9C, 0x47, 0xD0, 0x8F, 0xFB, 0x10, 0xD4, 0xB8};
static const unsigned char P_BE[32] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                       0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                       0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF, 0xFF, 0xFC, 0x2F};
static int started; /* 0 not tried, 1 ready, -1 unusable here */

static void limbs_of_le32(uint64_t l[5], const unsigned char le32[32]) {
    uint64_t w[4];
    memcpy(w, le32, 32);
    l[0] = w[0] & M52;
    l[1] = ((w[0] >> 52) | (w[1] << 12)) & M52;
    l[2] = ((w[1] >> 40) | (w[2] << 24)) & M52;
    l[3] = ((w[2] >> 28) | (w[3] << 36)) & M52;
    l[4] = w[3] >> 16;
}

int spn_ifma_start(void) {
    if (started) return started > 0;
    started = -1;
    if (!spn_ifma_cpu() || !spn_ecc_start()) return 0;
    /* Points cross as secp256k1_pubkey: x and y little-endian. Refuse any other layout. */
    unsigned char g33[33], expect[64];
    secp256k1_pubkey g, base, two, e, next;
    g33[0] = 0x02;
    memcpy(g33 + 1, GX_BE, 32);
    for (int i = 0; i < 32; i++) {
        expect[i] = GX_BE[31 - i];
        expect[32 + i] = GY_BE[31 - i];
    }
    if (!spn_parse33(spn_ctx.public, &g, g33) || memcmp(g.data, expect, 64) != 0) return 0;
    unsigned char k32[32] = {0};
    base = g;
    for (int i = 0; i < GWIN; i++) {
        two = base;
        memset(k32, 0, sizeof k32);
        k32[31] = 2;
        if (!spn_secp.ec_pubkey_tweak_mul(spn_ctx.public, &two, k32)) return 0;
        e = base;
        for (int j = 0; j < GENTRIES; j++) { /* e = (2j + 1)·2^(GW·i)·G */
            uint64_t limbs[10];
            limbs_of_le32(limbs, e.data);
            limbs_of_le32(limbs + 5, e.data + 32);
            for (int l = 0; l < 10; l++) gen_table[i][l][j] = limbs[l];
            const secp256k1_pubkey *pair[2] = {&e, &two};
            if (j + 1 < GENTRIES && !spn_secp.ec_pubkey_combine(spn_ctx.public, &next, pair, 2)) return 0;
            e = next; /* combine clears its output first: it cannot alias an input */
        }
        memset(k32, 0, sizeof k32);
        k32[31 - GW / 8] = (unsigned char)(1 << (GW % 8)); /* 2^GW */
        if (!spn_secp.ec_pubkey_tweak_mul(spn_ctx.public, &base, k32)) return 0;
    }
    started = 1;
    return 1;
}

/* ---- the engine's entry points ---- */

static void words_of_be32(uint64_t w[4][8], int lane, const unsigned char be32[32]) {
    for (int j = 0; j < 4; j++) {
        uint64_t x = 0;
        for (int k = 0; k < 8; k++) x = (x << 8) | be32[(3 - j) * 8 + k];
        w[j][lane] = x;
    }
}

/* Words of the points' x (and y for width 64), the lanes whose prefix and coordinates are in range
 * (bit i), and in *want_odd the lanes whose 33-byte prefix asks for an odd y. Public data. */
static unsigned parse_words(uint64_t wx[4][8], uint64_t wy[4][8], unsigned *want_odd, const unsigned char *in,
                            size_t width, const size_t lane[8]) {
    unsigned ok = 0;
    *want_odd = 0;
    memset(wy, 0, 4 * 8 * sizeof **wy);
    for (int i = 0; i < 8; i++) {
        const unsigned char *p = in + lane[i] * width;
        const unsigned char *x = width == 33 ? p + 1 : p;
        int good = memcmp(x, P_BE, 32) < 0;
        if (width == 33) {
            good &= p[0] == 0x02 || p[0] == 0x03;
            *want_odd |= (unsigned)(p[0] & 1) << i;
        } else {
            good &= memcmp(p + 32, P_BE, 32) < 0;
            words_of_be32(wy, i, p + 32);
        }
        words_of_be32(wx, i, x);
        ok |= (unsigned)good << i;
    }
    return ok;
}

SPN_IFMA_TARGET void spn_ifma_parse_points(const unsigned char *in, size_t width, size_t n, unsigned char (*pt64)[64],
                                           unsigned char *valid) {
    for (size_t base = 0; base < n; base += 8) {
        size_t cnt = n - base < 8 ? n - base : 8, lane[8];
        uint64_t wx[4][8], wy[4][8];
        unsigned want_odd;
        lanes_of(lane, base, cnt, 0);
        unsigned ok = parse_words(wx, wy, &want_odd, in, width, lane);
        fe8 x, y, rhs, y2, d, ny, seven;
        fe8_from_words(&x, wx);
        fe8_sqr(&rhs, &x);
        fe8_mul(&rhs, &rhs, &x);
        fe8_set1(&seven, 7);
        fe8_add(&rhs, &rhs, &seven); /* x³ + 7, m 2 */
        if (width == 33) {
            fe8_sqrt(&y, &rhs);
            fe8_canon(&y, &y);
            __mmask8 flip = (__mmask8)(_mm512_test_epi64_mask(y.l[0], v1(1)) ^ want_odd);
            fe8_neg(&ny, &y, 2);
            fe8_normw(&ny);
            fe8_canon(&ny, &ny);
            fe8_select(&y, flip, &y, &ny);
        } else {
            fe8_from_words(&y, wy);
        }
        fe8_sqr(&y2, &y);
        fe8_sub(&d, &y2, &rhs, 3);
        fe8_normw(&d);
        ok &= fe8_is_zero(&d);
        fe8_to_words(wy, &y);
        for (size_t k = 0; k < cnt; k++) {
            put_flag(valid, base + k, (unsigned char)((ok >> k) & 1));
            put_pt64(pt64[base + k], wx, wy, (int)k);
        }
    }
}

/* 1 when 0 < s < n, in constant time (s: 4 little-endian words). */
static uint64_t scalar_in_range(const uint64_t s[4]) {
    uint64_t borrow = 0, any = s[0] | s[1] | s[2] | s[3];
    for (int i = 0; i < 4; i++) {
        unsigned __int128 d = (unsigned __int128)s[i] - spn_ifma_n[i] - borrow;
        borrow = (uint64_t)(d >> 64) & 1;
    }
    return borrow & ((any | (0 - any)) >> 63);
}

SPN_IFMA_TARGET void spn_ifma_shared_secrets(const spn_ifma_glv *glv, const uint64_t b[4],
                                             const unsigned char (*pt64)[64], const unsigned char (*scalar32)[32],
                                             size_t n, unsigned char (*ecdh33)[33], unsigned char (*out64)[64]) {
    ge8 res[SPN_IFMA_GROUP];
    int8_t d[2][SPN_IFMA_VWIN][8];
    uint64_t wx[SPN_IFMA_GROUP][4][8], wy[SPN_IFMA_GROUP][4][8], s[4];
    unsigned char bad[SPN_IFMA_GROUP * 8];
    __mmask8 inf[SPN_IFMA_GROUP];
    spn_ifma_glv lg;
    for (size_t base = 0; base < n; base += SPN_IFMA_GROUP * 8) {
        size_t cnt = n - base < SPN_IFMA_GROUP * 8 ? n - base : SPN_IFMA_GROUP * 8, lane[8];
        int nv = (int)((cnt + 7) / 8);
        for (int v = 0; v < nv; v++) {
            gea8 t;
            __mmask8 neg1 = 0, neg2 = 0;
            lanes_of(lane, base, cnt, v);
            gea8_load(&t, pt64, lane);
            for (int i = 0; i < 8; i++) {
                const spn_ifma_glv *g = glv;
                bad[8 * v + i] = 0;
                if (scalar32 != NULL) { /* (b_scan·s_i): s_i public, the product secret */
                    spn_ifma_scalar_from_b32(s, scalar32[lane[i]]);
                    bad[8 * v + i] = (unsigned char)!scalar_in_range(s);
                    spn_ifma_scalar_mul(s, s, b);
                    spn_ifma_glv_recode(&lg, s);
                    g = &lg;
                }
                neg1 |= (__mmask8)(g->neg[0] << i);
                neg2 |= (__mmask8)(g->neg[1] << i);
                for (int h = 0; h < 2; h++)
                    for (int w = 0; w < SPN_IFMA_VWIN; w++) d[h][w][i] = g->d[h][w];
            }
            ecmult8(&res[v], &t, neg1, neg2, (const int8_t(*)[SPN_IFMA_VWIN][8])d);
        }
        ge8_to_affine_words(res, nv, wx, wy, inf);
        for (size_t k = 0; k < cnt; k++) {
            put_ser33(ecdh33[base + k], wx[k / 8], wy[k / 8], (int)(k % 8), bad[k] | ((inf[k / 8] >> (k % 8)) & 1));
            if (out64) put_pt64(out64[base + k], wx[k / 8], wy[k / 8], (int)(k % 8));
        }
    }
    spn_cleanse(res, sizeof res);
    spn_cleanse(d, sizeof d);
    spn_cleanse(wx, sizeof wx);
    spn_cleanse(wy, sizeof wy);
    spn_cleanse(s, sizeof s);
    spn_cleanse(&lg, sizeof lg);
}

SPN_IFMA_TARGET void spn_ifma_spend_points(const unsigned char spend64[64], const unsigned char (*t32)[32], size_t n,
                                           unsigned char (*pk64)[64], unsigned char (*p33)[33]) {
    ge8 res[SPN_IFMA_GROUP];
    gea8 start;
    uint64_t wx[SPN_IFMA_GROUP][4][8], wy[SPN_IFMA_GROUP][4][8], tw[5][8], t[4];
    __m512i tv[5];
    unsigned char bad[SPN_IFMA_GROUP * 8];
    __mmask8 inf[SPN_IFMA_GROUP];
    const size_t same[8] = {0};
    gea8_load(&start, (const unsigned char(*)[64])spend64, same);
    for (size_t base = 0; base < n; base += SPN_IFMA_GROUP * 8) {
        size_t cnt = n - base < SPN_IFMA_GROUP * 8 ? n - base : SPN_IFMA_GROUP * 8, lane[8];
        int nv = (int)((cnt + 7) / 8);
        for (int v = 0; v < nv; v++) {
            lanes_of(lane, base, cnt, v);
            for (int i = 0; i < 8; i++) {
                spn_ifma_scalar_from_b32(t, t32[lane[i]]);
                bad[8 * v + i] = (unsigned char)!scalar_in_range(t);
                uint64_t even = (t[0] & 1) - 1; /* all ones when t is even: use t + n */
                unsigned __int128 acc = 0;
                for (int j = 0; j < 4; j++) {
                    acc += (unsigned __int128)t[j] + (spn_ifma_n[j] & even);
                    tw[j][i] = (uint64_t)acc;
                    acc >>= 64;
                }
                tw[4][i] = (uint64_t)acc;
            }
            for (int j = 0; j < 5; j++) tv[j] = _mm512_loadu_si512(tw[j]);
            ecmult_gen8(&res[v], &start, tv);
        }
        ge8_to_affine_words(res, nv, wx, wy, inf);
        for (size_t k = 0; k < cnt; k++) {
            put_ser33(p33[base + k], wx[k / 8], wy[k / 8], (int)(k % 8), bad[k] | ((inf[k / 8] >> (k % 8)) & 1));
            put_pt64(pk64[base + k], wx[k / 8], wy[k / 8], (int)(k % 8));
        }
    }
    spn_cleanse(res, sizeof res);
    spn_cleanse(tw, sizeof tw);
    spn_cleanse(tv, sizeof tv);
    spn_cleanse(t, sizeof t);
    spn_cleanse(wx, sizeof wx);
    spn_cleanse(wy, sizeof wy);
}

/* Write the sums of a batch: res[q] is P-vector pv[q] plus label lab[q]. */
SPN_IFMA_TARGET static void flush_sums(ge8 *res, int nq, const size_t *pv, const size_t *lab, size_t n, size_t n_labels,
                                       unsigned char (*sums33)[33]) {
    uint64_t wx[SPN_IFMA_GROUP][4][8], wy[SPN_IFMA_GROUP][4][8];
    __mmask8 inf[SPN_IFMA_GROUP];
    ge8_to_affine_words(res, nq, wx, wy, inf);
    for (int q = 0; q < nq; q++)
        for (size_t k = 0; k < 8 && pv[q] * 8 + k < n; k++)
            put_ser33(sums33[(pv[q] * 8 + k) * n_labels + lab[q]], wx[q], wy[q], (int)k, (inf[q] >> k) & 1);
}

SPN_IFMA_TARGET void spn_ifma_label_sums(const unsigned char (*pk64)[64], size_t n, const unsigned char (*label64)[64],
                                         size_t n_labels, unsigned char (*sums33)[33]) {
    ge8 res[SPN_IFMA_GROUP];
    size_t pv[SPN_IFMA_GROUP], lab[SPN_IFMA_GROUP];
    int nq = 0;
    for (size_t v = 0; v * 8 < n; v++) {
        size_t lane[8];
        gea8 pa;
        ge8 p;
        lanes_of(lane, v * 8, n - v * 8 < 8 ? n - v * 8 : 8, 0);
        gea8_load(&pa, pk64, lane);
        p.x = pa.x;
        p.y = pa.y;
        fe8_set1(&p.z, 1);
        for (size_t m = 0; m < n_labels; m++) {
            gea8 l;
            size_t same[8];
            for (int i = 0; i < 8; i++) same[i] = m;
            gea8_load(&l, label64, same);
            ge8_madd(&res[nq], &p, &l);
            pv[nq] = v;
            lab[nq++] = m;
            if (nq == SPN_IFMA_GROUP) {
                flush_sums(res, nq, pv, lab, n, n_labels, sums33);
                nq = 0;
            }
        }
    }
    if (nq) flush_sums(res, nq, pv, lab, n, n_labels, sums33);
}

/* ---- timing entry point (dudect-style checks) ---- */

SPN_IFMA_TARGET void spn_ifma_time(int op, const unsigned char *in, size_t n, const unsigned char (*pt64)[64],
                                   uint64_t *cycles) {
    unsigned char out33[8][33], pk[8][64];
    uint64_t b[4];
    spn_ifma_glv glv;
    unsigned aux;
    static const uint64_t one[4] = {1, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        const unsigned char *x = in + i * (op == SPN_IFMA_TIME_SPEND || op == SPN_IFMA_TIME_LANES ? 256 : 32);
        _mm_lfence();
        uint64_t t0 = __rdtscp(&aux);
        _mm_lfence();
        if (op == SPN_IFMA_TIME_ECDH) { /* the scan key's recoding, then b·T on 8 lanes */
            spn_ifma_scalar_from_b32(b, x);
            spn_ifma_glv_recode(&glv, b);
            spn_ifma_shared_secrets(&glv, b, pt64, NULL, 8, out33, NULL);
        } else if (op == SPN_IFMA_TIME_LANES) { /* k_i·T_i with a secret k_i per lane (block scans) */
            spn_ifma_shared_secrets(NULL, one, pt64, (const unsigned char(*)[32])x, 8, out33, NULL);
        } else if (op == SPN_IFMA_TIME_SPEND) { /* B + t_i·G on 8 lanes */
            spn_ifma_spend_points(pt64[0], (const unsigned char(*)[32])x, 8, pk, out33);
        } else { /* the variable-time control: a Jacobi symbol */
            out33[0][0] = (unsigned char)spn_is_x_var(x);
        }
        _mm_lfence();
        uint64_t t1 = __rdtscp(&aux);
        _mm_lfence();
        put_u64(cycles, i, t1 - t0);
    }
    spn_cleanse(b, sizeof b);
    spn_cleanse(&glv, sizeof glv);
    spn_cleanse(out33, sizeof out33);
}

/* ---- test entry point (field level) ---- */

static void transpose_raw(uint64_t t[5][8], const uint64_t raw[40]) {
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 5; j++) t[j][i] = raw[5 * i + j];
}

SPN_IFMA_TARGET void spn_ifma_fe_test(int op, const uint64_t a[40], const uint64_t b[40], unsigned char out32[8][32]) {
    fe8 x, y, r;
    uint64_t w[4][8], t[5][8];
    transpose_raw(t, a);
    for (int j = 0; j < 5; j++) x.l[j] = _mm512_loadu_si512(t[j]);
    transpose_raw(t, b);
    for (int j = 0; j < 5; j++) y.l[j] = _mm512_loadu_si512(t[j]);
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
    for (int i = 0; i < 8; i++) put_be32(out32[i], w, i);
}

#else /* not x86-64: spn_ifma_start() returns 0, so nothing below is ever called */

int spn_ifma_cpu(void) { return 0; }
int spn_ifma_start(void) { return 0; }
void spn_ifma_parse_points(const unsigned char *in, size_t width, size_t n, unsigned char (*pt64)[64],
                           unsigned char *valid) {
    (void)in, (void)width, (void)pt64;
    memset(valid, 0, n);
}
void spn_ifma_shared_secrets(const spn_ifma_glv *glv, const uint64_t b[4], const unsigned char (*pt64)[64],
                             const unsigned char (*scalar32)[32], size_t n, unsigned char (*ecdh33)[33],
                             unsigned char (*out64)[64]) {
    (void)glv, (void)b, (void)pt64, (void)scalar32, (void)out64;
    for (size_t i = 0; i < n; i++) ecdh33[i][0] = 0;
}
void spn_ifma_spend_points(const unsigned char spend64[64], const unsigned char (*t32)[32], size_t n,
                           unsigned char (*pk64)[64], unsigned char (*p33)[33]) {
    (void)spend64, (void)t32, (void)pk64;
    for (size_t i = 0; i < n; i++) p33[i][0] = 0;
}
void spn_ifma_label_sums(const unsigned char (*pk64)[64], size_t n, const unsigned char (*label64)[64],
                         size_t n_labels, unsigned char (*sums33)[33]) {
    (void)pk64, (void)label64;
    for (size_t i = 0; i < n * n_labels; i++) sums33[i][0] = 0;
}
void spn_ifma_time(int op, const unsigned char *in, size_t n, const unsigned char (*pt64)[64], uint64_t *cycles) {
    (void)op, (void)in, (void)pt64;
    memset(cycles, 0, n * sizeof *cycles);
}

void spn_ifma_fe_test(int op, const uint64_t a[40], const uint64_t b[40], unsigned char out32[8][32]) {
    (void)op;
    (void)a;
    (void)b;
    memset(out32, 0, 8 * 32);
}

#endif
