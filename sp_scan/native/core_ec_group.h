/* One EC engine core, written once over the lane API (core_ec_lanes.h): the group law, the
 * variable- and fixed-base multiplications, batched inversion, and the entry points of spn_ec_core.
 * Included once per engine by a file that first defines
 *   SPN_EC_CORE   the descriptor's name (e.g. spn_ec_ifma)
 *   SPN_EC_LABEL  its name string (e.g. "ifma")
 *   SPN_EC_CPU    int (*)(void): whether this CPU can run it
 * and includes its lane backend (core_lanes_*.h). Everything here is static but the descriptor.
 *
 * Constant time in the secrets (the scan key, per-lane scalars, t): complete formulas, so every
 * lane runs the same instructions; table entries are taken by reading them all with masks; no
 * branch or address depends on a secret. Every copy of a value derived from a secret is wiped. */
#include "core_ec.h"
#include "core_ec_lanes.h"

/* ---- points ----
 * Projective (X : Y : Z) with x = X/Z, y = Y/Z, infinity = (0 : 1 : 0), and the complete formulas of
 * Renes, Costello and Batina ("Complete addition formulas for prime order elliptic curves", 2016,
 * Algorithms 7, 8 and 9 for a = 0, b3 = 3·7). Complete: no input (doubling, P + (−P), infinity)
 * needs a branch, which is what lets lanes run one schedule whatever their points and digits are.
 * The mixed addition is complete for any projective P and affine Q (Q is never infinity here). */
typedef struct {
    fe x, y, z;
} ge;

typedef struct {
    fe x, y;
} gea;

/* In: m ≤ 3 each. Out: m (2, 2, 1). */
SPN_EC_FN static void ge_dbl(ge *r, const ge *a) {
    fe t0, t1, t2, x3, y3, z3;
    fe_sqr(&t0, &a->y);
    fe_shl(&z3, &t0, 3);         /* 8·Y²        m 8 */
    fe_mul(&t1, &a->y, &a->z);
    fe_sqr(&t2, &a->z);
    fe_mul_small(&t2, &t2, 21);  /* b3·Z²       m 1 */
    fe_mul(&x3, &t2, &z3);
    fe_add(&y3, &t0, &t2);       /*             m 2 */
    fe_mul(&z3, &t1, &z3);
    fe_add(&t1, &t2, &t2);
    fe_add(&t2, &t1, &t2);       /* 3·b3·Z²     m 3 */
    fe_sub(&t0, &t0, &t2, 4);    /* Y² − 3b3Z²  m 5 */
    fe_mul(&y3, &t0, &y3);
    fe_add(&y3, &x3, &y3);       /*             m 2 */
    fe_mul(&t1, &a->x, &a->y);
    fe_mul(&x3, &t0, &t1);
    fe_add(&x3, &x3, &x3);       /*             m 2 */
    r->x = x3;
    r->y = y3;
    r->z = z3;
}

/* The second half of Algorithms 7 and 8, from t0 = X1X2, t1 = Y1Y2, t2 = b3·(Z1Z2), t3 = X1Y2 + Y1X2,
 * t4 = Y1Z2 + Z1Y2 and y3 = X1Z2 + Z1X2 (m ≤ 1, 1, 1, 4, 4, 4). Out: m (3, 2, 2). */
SPN_EC_FN static void ge_add_finish(ge *r, fe *t0, fe *t1, const fe *t2, const fe *t3, const fe *t4, fe *y3) {
    fe x3, z3, u;
    fe_add(&x3, t0, t0);
    fe_add(t0, &x3, t0);         /* 3·X1X2  m 3 */
    fe_add(&z3, t1, t2);         /* m 2 */
    fe_sub(t1, t1, t2, 2);       /* m 3 */
    fe_mul_small(y3, y3, 21);    /* 21·4 ≤ 128; m 1 */
    fe_mul(&x3, t4, y3);
    fe_mul(&u, t3, t1);
    fe_sub(&x3, &u, &x3, 2);     /* m 3 */
    fe_mul(y3, y3, t0);
    fe_mul(t1, t1, &z3);
    fe_add(y3, t1, y3);          /* m 2 */
    fe_mul(t0, t0, t3);
    fe_mul(&z3, &z3, t4);
    fe_add(&z3, &z3, t0);        /* m 2 */
    r->x = x3;
    r->y = *y3;
    r->z = z3;
}

/* In: m ≤ 3 each. Out: m (3, 2, 2). r may alias p or q. */
SPN_EC_FN static void ge_add(ge *r, const ge *p, const ge *q) {
    fe t0, t1, t2, t3, t4, x3, y3;
    fe_mul(&t0, &p->x, &q->x);
    fe_mul(&t1, &p->y, &q->y);
    fe_mul(&t2, &p->z, &q->z);
    fe_add(&t3, &p->x, &p->y);   /* m ≤ 6 */
    fe_add(&t4, &q->x, &q->y);
    fe_mul(&t3, &t3, &t4);
    fe_add(&t4, &t0, &t1);       /* m 2 */
    fe_sub(&t3, &t3, &t4, 3);    /* X1Y2 + Y1X2  m 4 */
    fe_add(&t4, &p->y, &p->z);
    fe_add(&x3, &q->y, &q->z);
    fe_mul(&t4, &t4, &x3);
    fe_add(&x3, &t1, &t2);
    fe_sub(&t4, &t4, &x3, 3);    /* Y1Z2 + Z1Y2  m 4 */
    fe_add(&x3, &p->x, &p->z);
    fe_add(&y3, &q->x, &q->z);
    fe_mul(&x3, &x3, &y3);
    fe_add(&y3, &t0, &t2);
    fe_sub(&y3, &x3, &y3, 3);    /* X1Z2 + Z1X2  m 4 */
    fe_mul_small(&t2, &t2, 21);  /* m 1 */
    ge_add_finish(r, &t0, &t1, &t2, &t3, &t4, &y3);
}

/* r = p + q for affine q (Z2 = 1). In: p m ≤ (3, 3, 3), q m ≤ (3, 3). Out: m (3, 2, 2). */
SPN_EC_FN static void ge_madd(ge *r, const ge *p, const gea *q) {
    fe t0, t1, t2, t3, t4, y3;
    fe_mul(&t0, &p->x, &q->x);
    fe_mul(&t1, &p->y, &q->y);
    fe_add(&t3, &q->x, &q->y);
    fe_add(&t4, &p->x, &p->y);
    fe_mul(&t3, &t3, &t4);
    fe_add(&t4, &t0, &t1);
    fe_sub(&t3, &t3, &t4, 3);    /* m 4 */
    fe_mul(&t4, &q->y, &p->z);
    fe_add(&t4, &t4, &p->y);     /* m ≤ 4 */
    fe_mul(&y3, &q->x, &p->z);
    fe_add(&y3, &y3, &p->x);     /* m ≤ 4 */
    fe_mul_small(&t2, &p->z, 21);
    ge_add_finish(r, &t0, &t1, &t2, &t3, &t4, &y3);
}

SPN_EC_FN static void ge_set_infinity(ge *r) {
    fe_set1(&r->x, 0);
    fe_set1(&r->y, 1);
    fe_set1(&r->z, 0);
}

/* ---- moving points in and out ----
 * The reads and writes of callers' buffers are plain functions (no target attribute), so
 * AddressSanitizer checks them even where the backend's functions are built uninstrumented. */

/* w[j][i] = word j of the coordinate at byte `off` of record lane[i], records of `size` bytes at rec
 * (points: size 64, off 0 for x and 32 for y). */
static void coord_words(uint64_t w[4][SPN_LANES], const unsigned char *rec, size_t size, const size_t lane[SPN_LANES],
                        size_t off) {
    for (int i = 0; i < SPN_LANES; i++)
        for (int j = 0; j < 4; j++) memcpy(&w[j][i], rec + lane[i] * size + off + 8 * j, 8);
}

SPN_EC_FN static void gea_load(gea *r, const unsigned char (*pt64)[64], const size_t lane[SPN_LANES]) {
    uint64_t wx[4][SPN_LANES], wy[4][SPN_LANES];
    coord_words(wx, *pt64, 64, lane, 0);
    coord_words(wy, *pt64, 64, lane, 32);
    fe_from_words(&r->x, wx);
    fe_from_words(&r->y, wy);
    spn_cleanse(wx, sizeof wx);
    spn_cleanse(wy, sizeof wy);
}

/* 32-byte big-endian of lane i from canonical words. */
static void put_be32(unsigned char out32[32], const uint64_t w[4][SPN_LANES], int lane) {
    for (int j = 0; j < 4; j++)
        for (int k = 0; k < 8; k++) out32[31 - 8 * j - k] = (unsigned char)(w[j][lane] >> (8 * k));
}

/* out33 = ser_P of lane i, or a leading 0 when bad (0 or 1, which may derive from a secret: no branch). */
static void put_ser33(unsigned char out33[33], const uint64_t wx[4][SPN_LANES], const uint64_t wy[4][SPN_LANES],
                      int lane, unsigned bad) {
    out33[0] = (unsigned char)((0x02 | (wy[0][lane] & 1)) & ((bad & 1) - 1));
    put_be32(out33 + 1, wx, lane);
}

static void put_pt64(unsigned char out64[64], const uint64_t wx[4][SPN_LANES], const uint64_t wy[4][SPN_LANES],
                     int lane) {
    for (int j = 0; j < 4; j++) {
        memcpy(out64 + 8 * j, &wx[j][lane], 8);
        memcpy(out64 + 32 + 8 * j, &wy[j][lane], 8);
    }
}

static void put_flag(unsigned char *out, size_t i, unsigned char v) { out[i] = v; }

/* Lane indices of vector v of a chunk of cnt items starting at base: the last item repeats. */
static void lanes_of(size_t lane[SPN_LANES], size_t base, size_t cnt, int v) {
    for (int i = 0; i < SPN_LANES; i++) {
        size_t k = (size_t)v * SPN_LANES + (size_t)i;
        lane[i] = base + (k < cnt ? k : cnt - 1);
    }
}

/* ---- batched inversion: Montgomery's trick across vectors, one exponentiation for all ---- */

/* z[0..n) = 1/z[0..n) lane-wise (m 1 in, m 1 out), n ≤ SPN_EC_GROUP; lanes that are 0 stay 0. */
SPN_EC_FN static void fe_inv_many(fe *z, int n) {
    fe prefix[SPN_EC_GROUP], acc, one, t, zero_fe;
    spn_mask zero[SPN_EC_GROUP];
    fe_set1(&one, 1);
    fe_set1(&zero_fe, 0);
    acc = one;
    for (int i = 0; i < n; i++) {
        zero[i] = fe_is_zero(&z[i]);
        fe_select(&z[i], zero[i], &z[i], &one);
        if (i == 0) acc = z[0];
        else fe_mul(&acc, &acc, &z[i]);
        prefix[i] = acc;
    }
    fe_inv(&acc, &acc); /* 1/(z[0]···z[n−1]) */
    for (int i = n - 1; i > 0; i--) {
        fe_mul(&t, &acc, &prefix[i - 1]); /* 1/z[i] */
        fe_mul(&acc, &acc, &z[i]);        /* 1/(z[0]···z[i−1]) */
        fe_select(&z[i], zero[i], &t, &zero_fe);
    }
    fe_select(&z[0], zero[0], &acc, &zero_fe);
    spn_cleanse(prefix, sizeof prefix);
    spn_cleanse(&acc, sizeof acc);
    spn_cleanse(&t, sizeof t);
}

/* Affine, canonical words of n ≤ SPN_EC_GROUP projective vectors (their z is overwritten); inf[v]:
 * the lanes at infinity. */
SPN_EC_FN static void ge_to_affine_words(ge *pts, int n, uint64_t (*wx)[4][SPN_LANES], uint64_t (*wy)[4][SPN_LANES],
                                         spn_mask *inf) {
    fe z[SPN_EC_GROUP], x, y;
    for (int v = 0; v < n; v++) {
        fe_normw(&pts[v].z); /* m ≤ 2 -> 1 */
        inf[v] = fe_is_zero(&pts[v].z);
        z[v] = pts[v].z;
    }
    fe_inv_many(z, n);
    for (int v = 0; v < n; v++) {
        fe_mul(&x, &pts[v].x, &z[v]);
        fe_mul(&y, &pts[v].y, &z[v]);
        fe_canon(&x, &x);
        fe_canon(&y, &y);
        fe_to_words(wx[v], &x);
        fe_to_words(wy[v], &y);
    }
    spn_cleanse(z, sizeof z);
    spn_cleanse(&x, sizeof x);
    spn_cleanse(&y, sizeof y);
}

/* ---- variable base: k·T with the GLV split, signed base-2^5 digits, a per-lane table ---- */

#ifndef SPN_EC_JACOBIAN /* the constant-time lookup and ladder; those backends use ecmult_odd below */
/* One window's digits on the lanes: |d| (≤ 16) and the lanes where d < 0. */
typedef struct {
    uint64_t abs[SPN_LANES];
    unsigned neg;
} digits_t;

/* Lane i of digit row dr from d (constant time: no branch on the digit). */
static void digit_put(digits_t *dr, int lane, int8_t d) {
    uint64_t s = (uint64_t)((int64_t)d >> 63);
    dr->abs[lane] = ((uint64_t)(int64_t)d ^ s) - s;
    dr->neg |= (unsigned)(s & 1) << lane;
}

/* r = ±|d|·entry: every entry is read (masked selections), none is chosen by address. The sign is
 * applied with scratch *ny (the caller wipes it and r; restrict lets r stay in registers). */
SPN_EC_FN static void ge_lookup(ge *restrict r, const ge *restrict tab, const digits_t *dr, spn_mask flip,
                                fe *restrict ny) {
    spn_lv a = lv_load(dr->abs);
    spn_mask m[17];
    for (int j = 1; j <= 16; j++) m[j] = lv_eq(a, lv_set1((uint64_t)j));
    /* One coordinate at a time, so its running selection stays in registers across the 16 entries. */
    r->x = tab[0].x;
    for (int j = 1; j <= 16; j++) fe_select(&r->x, m[j], &r->x, &tab[j].x);
    r->y = tab[0].y;
    for (int j = 1; j <= 16; j++) fe_select(&r->y, m[j], &r->y, &tab[j].y);
    r->z = tab[0].z;
    for (int j = 1; j <= 16; j++) fe_select(&r->z, m[j], &r->z, &tab[j].z);
    fe_neg(ny, &r->y, 3); /* table y: m ≤ 2 */
    fe_select(&r->y, mk_xor(mk_bits(dr->neg), flip), &r->y, ny);
}
#endif

/* β as an fe (λ·(x, y) = (β·x, y)). */
SPN_EC_FN static void fe_beta(fe *beta) {
    static const uint64_t BETA[4] = {0xC1396C28719501EEULL, 0x9CF0497512F58995ULL, 0x6E64479EAC3434E9ULL,
                                     0x7AE96A2B657C0710ULL};
    spn_lv bw[4];
    for (int j = 0; j < 4; j++) bw[j] = lv_set1(BETA[j]);
    fe_from_lv(beta, bw);
}

#ifndef SPN_EC_JACOBIAN
/* tab[j] = j·T' for j = 0..16 (tab[0] infinity), T' = T negated on the lanes of neg1; *tp = T'. */
SPN_EC_FN static void ecmult_table(ge tab[17], gea *tp, const gea *t, spn_mask neg1, fe *ny) {
    *tp = *t;
    fe_neg(ny, &tp->y, 2);
    fe_select(&tp->y, neg1, &tp->y, ny);
    ge_set_infinity(&tab[0]);
    tab[1].x = tp->x;
    tab[1].y = tp->y;
    fe_set1(&tab[1].z, 1);
    ge_dbl(&tab[2], &tab[1]);
    for (int j = 3; j <= 16; j++) ge_madd(&tab[j], &tab[j - 1], tp);
}

/* r = k·T lane-wise, k ≡ (−1)^neg1·|k1| + (−1)^neg2·|k2|·λ with the digits d[h][w] of |k1|, |k2|;
 * T affine on the curve, m ≤ 1. Wipes its table and scratch. */
SPN_EC_FN static void ecmult(ge *r, const gea *t, spn_mask neg1, spn_mask neg2, const digits_t d[2][SPN_GLV_WIN]) {
    ge tab[17], q;
    gea tp;
    fe ny, beta;
    fe_beta(&beta);
    ecmult_table(tab, &tp, t, neg1, &ny);
    spn_mask flip = mk_xor(neg1, neg2);
    for (int w = SPN_GLV_WIN - 1; w >= 0; w--) {
        if (w == SPN_GLV_WIN - 1) {
            ge_lookup(r, tab, &d[0][w], mk_bits(0), &ny);
        } else {
            for (int i = 0; i < SPN_GLV_W; i++) ge_dbl(r, r);
            ge_lookup(&q, tab, &d[0][w], mk_bits(0), &ny);
            ge_add(r, r, &q);
        }
        ge_lookup(&q, tab, &d[1][w], flip, &ny);
        fe_mul(&q.x, &q.x, &beta); /* λ·(x, y) = (β·x, y) */
        ge_add(r, r, &q);
    }
    spn_cleanse(tab, sizeof tab);
    spn_cleanse(&q, sizeof q);
    spn_cleanse(&tp, sizeof tp);
    spn_cleanse(&ny, sizeof ny);
}
#endif

/* ---- Jacobian coordinates (x = X/Z², y = Y/Z³): the doubling is 2M + 5S against the complete
 * formula's 6M + 2S; on a = 0 curves it has no exceptional input, infinity stays Z = 0 ---- */

/* Jacobian doubling, a = 0 (Bernstein–Lange dbl-2009-l). In: m ≤ (1, 3, 2). Out: m (1, 3, 2). */
SPN_EC_FN static void gej_dbl(ge *r, const ge *a) {
    fe A, B, C, D, E, F, t;
    fe_sqr(&A, &a->x);          /* X² */
    fe_sqr(&B, &a->y);          /* Y² */
    fe_sqr(&C, &B);             /* Y⁴ */
    fe_add(&t, &a->x, &B);      /* m 2 */
    fe_sqr(&D, &t);
    fe_add(&t, &A, &C);         /* m 2 */
    fe_sub(&D, &D, &t, 3);      /* (X + Y²)² − X² − Y⁴ = 2XY²  m 4 */
    fe_mul_small(&D, &D, 2);    /* D = 4XY²  m 1 */
    fe_add(&E, &A, &A);
    fe_add(&E, &E, &A);         /* 3X²  m 3 */
    fe_sqr(&F, &E);
    fe_mul(&r->z, &a->y, &a->z);
    fe_add(&r->z, &r->z, &r->z); /* 2YZ  m 2 */
    fe_add(&t, &D, &D);         /* m 2 */
    fe_sub(&r->x, &F, &t, 3);   /* F − 2D  m 4 */
    fe_normw(&r->x);            /* m 1 */
    fe_sub(&t, &D, &r->x, 2);   /* m 3 */
    fe_mul(&r->y, &E, &t);
    fe_mul_small(&C, &C, 8);    /* 8Y⁴  m 1 */
    fe_sub(&r->y, &r->y, &C, 2); /* m 3 */
}

/* Jacobian (m ≤ (1, 3, 2)) to projective: X·Z, Y, Z³. Out: m (1, 3, 1). */
SPN_EC_FN static void gej_to_projective(ge *r) {
    fe z2;
    fe_sqr(&z2, &r->z);
    fe_mul(&r->x, &r->x, &r->z);
    fe_mul(&r->z, &r->z, &z2);
}

/* ---- variable base in Jacobian coordinates: the secret ladder of backends that define
 * SPN_EC_JACOBIAN, and every backend's ladder on public scalars (a block's tweaks) ----
 * k·T from the odd form of k's GLV recoding (spn_glv.u: 26 odd digits per half, none 0), a table of
 * the odd multiples T, 3T, ..., 31T sharing one z (affine points of an isomorphic curve y² = x³ + 7z⁶,
 * on which the formulas below, which never use the curve's constant, run unchanged), and Jacobian
 * doublings (2M + 5S) with a unified addition (7M + 5S). Constant time but for the public ladder's
 * table lookups: the same instructions whatever the digits and points; a degenerate case is a masked
 * selection, never a branch. */

/* r = p + q, p Jacobian (m ≤ (3, 3, 2)), q affine (m ≤ (1, 2)); out m (3, 2, 1); r may alias p.
 * The slope (x1² + x1x2 + x2²)/(y1 + y2) (Brier–Joye) is the tangent's when p = q and the chord's
 * otherwise, unless y1 = −y2: then the chord's (y1 − y2)/(x1 − x2) takes over, right when x1 ≠ x2
 * (x2 = β·x1 or β²·x1, where the first slope is 0/0) and a zero denominator when p = −q, so Z3 = 0
 * (infinity). p at infinity (Z1 = 0) gives q. */
SPN_EC_FN static void gej_madd_ct(ge *r, const ge *p, const gea *q) {
    fe zz, zzz, u2, s2, t, m, rr, m_alt, rr_alt, n, qq, x3, y3, z3, w, one, zero;
    spn_mask deg, inf;
    fe_sqr(&zz, &p->z);
    fe_mul(&u2, &q->x, &zz);         /* u2 = x2·Z1² */
    fe_mul(&zzz, &zz, &p->z);
    fe_mul(&s2, &q->y, &zzz);        /* s2 = y2·Z1³ */
    fe_add(&t, &p->x, &u2);          /* t = u1 + u2      m ≤ 4 */
    fe_add(&m, &p->y, &s2);          /* m = s1 + s2      m ≤ 4 */
    fe_sqr(&rr, &t);
    fe_mul(&w, &p->x, &u2);
    fe_sub(&rr, &rr, &w, 2);         /* rr = t² − u1·u2  m 3 */
    fe_sub(&m_alt, &p->x, &u2, 2);   /* u1 − u2          m ≤ 5 */
    fe_add(&rr_alt, &p->y, &p->y);   /* s1 − s2 = 2·s1 when s2 = −s1: m ≤ 6 */
    w = m;
    fe_normw(&w);
    deg = fe_is_zero(&w);            /* y1 = −y2 */
    fe_select(&rr, deg, &rr, &rr_alt); /* m ≤ 6 */
    fe_select(&m_alt, deg, &m, &m_alt); /* the denominator used: m ≤ 5 */
    fe_sqr(&n, &m_alt);              /* n = m'² */
    fe_mul(&qq, &t, &n);             /* q = t·n */
    fe_mul(&z3, &m_alt, &p->z);      /* Z3 = m'·Z1 */
    fe_sqr(&y3, &rr);                /* rr² */
    fe_sub(&x3, &y3, &qq, 2);        /* X3 = rr² − q     m 3 */
    /* Y3 = (rr·(q − 2·X3) − m·m'³)/2, with q − 2·X3 = 3q − 2rr² and m·m'³ = n² (or 0 when degenerate, m = 0) */
    fe_add(&w, &qq, &qq);
    fe_add(&w, &w, &qq);             /* 3q               m 3 */
    fe_add(&y3, &y3, &y3);           /* 2rr²             m 2 */
    fe_sub(&w, &w, &y3, 3);          /*                  m 6 */
    fe_mul(&y3, &rr, &w);
    fe_sqr(&n, &n);
    fe_set1(&zero, 0);
    fe_select(&n, deg, &n, &zero);   /* m·m'³: 0 when m = 0 */
    fe_sub(&y3, &y3, &n, 2);         /*                  m 3 */
    fe_half(&y3, &y3);               /*                  m 2 */
    w = p->z;
    fe_normw(&w);
    inf = fe_is_zero(&w);
    fe_set1(&one, 1);
    fe_select(&r->x, inf, &x3, &q->x);
    fe_select(&r->y, inf, &y3, &q->y);
    fe_select(&r->z, inf, &z3, &one);
}

/* Co-Z addition (Meloni), p and q Jacobian with the same Z (m ≤ (1, 1), public, p ≠ ±q): r = p + q
 * and p updated to r's Z; *h = Z(r)/Z (the ratio). 5M + 2S; the Zs themselves are not computed.
 * Out m (1, 1) for r's and p's X and Y, h m 1. */
SPN_EC_FN static void gej_zaddu(gea *r, gea *p, fe *h, const gea *q) {
    fe a, b, c, d, e, t;
    fe_sub(h, &q->x, &p->x, 2);      /* X2 − X1 */
    fe_normw(h);
    fe_sqr(&a, h);
    fe_mul(&b, &p->x, &a);           /* X1·(X2 − X1)² */
    fe_mul(&c, &q->x, &a);
    fe_sub(&t, &q->y, &p->y, 2);     /* Y2 − Y1 */
    fe_sqr(&d, &t);
    fe_sub(&e, &c, &b, 2);
    fe_mul(&e, &e, &p->y);           /* Y1·(X2 − X1)³ */
    fe_add(&c, &c, &b);
    fe_sub(&r->x, &d, &c, 3);        /* X3 = (Y2 − Y1)² − B − C */
    fe_normw(&r->x);
    fe_sub(&c, &b, &r->x, 2);
    fe_mul(&c, &c, &t);
    fe_sub(&r->y, &c, &e, 2);        /* Y3 = (Y2 − Y1)(B − X3) − E */
    fe_normw(&r->y);
    p->x = b;
    p->y = e;
}

/* The odd multiples of affine T (m ≤ 1, public), (2j + 1)·T for j < 16, as affine points of one
 * isomorphic curve, (x_j·z², y_j·z³) for the z returned in *zc: tab[0][c][j] words c of x (c < 4) and
 * y (c ≥ 4), canonical; tab[1] the same with β·x (the λ half's entries). The multiples are added with
 * co-Z additions on a first isomorphic curve, where T and 2T are affine (scale z(2T)), then brought to
 * the last one's z with the ratios of the additions. */
SPN_EC_FN static void odd_table(spn_lv tab[2][8][16], fe *zc, const gea *t, const fe *beta) {
    gea p[16], d2;
    ge d;
    fe h[16], z2, ratio, x, y;
    uint64_t w[4][SPN_LANES];
    d.x = t->x;
    d.y = t->y;
    fe_set1(&d.z, 1);
    gej_dbl(&d, &d);                 /* 2T: m (1, 3, 2) */
    fe_normw(&d.y);
    fe_normw(&d.z);
    d2.x = d.x;
    d2.y = d.y;
    fe_sqr(&z2, &d.z);               /* T on the curve scaled by z(2T): (x·z², y·z³), the same Z (1) as 2T */
    fe_mul(&p[0].x, &t->x, &z2);
    fe_mul(&z2, &z2, &d.z);
    fe_mul(&p[0].y, &t->y, &z2);
    for (int j = 1; j < 16; j++) gej_zaddu(&p[j], &d2, &h[j], &p[j - 1]); /* p[j] = p[j−1] + 2T */
    fe_set1(&ratio, 1); /* set at j = 14 below; this keeps the compiler's flow analysis quiet */
    for (int j = 15; j >= 0; j--) { /* ratio = z15/zj (z0 = 1) */
        if (j == 15) {
            x = p[15].x;
            y = p[15].y;
        } else {
            if (j < 14) fe_mul(&ratio, &ratio, &h[j + 1]);
            else ratio = h[15];
            fe_sqr(&z2, &ratio);
            fe_mul(&x, &p[j].x, &z2);
            fe_mul(&z2, &z2, &ratio);
            fe_mul(&y, &p[j].y, &z2);
        }
        fe_canon(&y, &y);
        fe_to_words(w, &y);
        for (int c = 0; c < 4; c++) tab[0][4 + c][j] = tab[1][4 + c][j] = lv_load(w[c]);
        fe_canon(&y, &x);
        fe_to_words(w, &y);
        for (int c = 0; c < 4; c++) tab[0][c][j] = lv_load(w[c]);
        fe_mul(&x, &x, beta);
        fe_canon(&x, &x);
        fe_to_words(w, &x);
        for (int c = 0; c < 4; c++) tab[1][c][j] = lv_load(w[c]);
    }
    fe_mul(zc, &ratio, &d.z);
}

/* out[c] lane i = lane i of cols[c][idx_i] for public indices (idx_i < 16): only the entries some lane
 * uses are read. */
SPN_EC_FN static void pick16_var(spn_lv out[8], const spn_lv cols[8][16], spn_lv idx) {
    uint64_t ix[SPN_LANES];
    unsigned used = 0;
    lv_store(ix, idx);
    for (int i = 0; i < SPN_LANES; i++) used |= 1u << ix[i];
    int j = __builtin_ctz(used);
    for (int c = 0; c < 8; c++) out[c] = cols[c][j];
    for (used &= used - 1; used; used &= used - 1) {
        j = __builtin_ctz(used);
        spn_mask m = lv_eq(idx, lv_set1((uint64_t)j));
        for (int c = 0; c < 8; c++) out[c] = lv_select(m, out[c], cols[c][j]);
    }
}

/* r = the digit 2u − 31 times the table's point, per lane: entry (|d| − 1)/2 of tab (odd_table's
 * tab[0], or tab[1] for the λ half), y negated where u < 16. pub: u is public, only the entries used
 * are read; else (SPN_EC_JACOBIAN backends) every entry is. Out: m (1, 2). */
SPN_EC_FN static void odd_lookup(gea *restrict r, const spn_lv tab[8][16], spn_lv u, int pub, fe *restrict ny) {
    spn_mask pos = lv_test(u, lv_set1(16));
    spn_lv idx = lv_and(lv_select(pos, lv_xor(u, lv_set1(15)), u), lv_set1(15)), w[8];
#ifdef SPN_EC_JACOBIAN
    if (!pub)
        lv_pick16(w, tab, idx);
    else
#else
    (void)pub; /* these backends' secret ladder is ecmult: here u is always public */
#endif
        pick16_var(w, tab, idx);
    fe_from_lv(&r->x, w);
    fe_from_lv(&r->y, w + 4);
    fe_neg(ny, &r->y, 2);
    fe_select(&r->y, pos, ny, &r->y);
    spn_cleanse(w, sizeof w);
}

/* r = k·T lane-wise, Jacobian on the curve (out m (3, 2, 1)), for k in odd form: lane i's window w of
 * half h at u[h][w][i] (pub: u public, see odd_lookup). T affine on the curve, m ≤ 1, public. Wipes its
 * scratch (the table is T's). */
SPN_EC_FN static void ecmult_odd(ge *r, const gea *t, const uint64_t u[2][SPN_GLV_WIN][SPN_LANES], int pub) {
    spn_lv tab[2][8][16];
    fe zc, ny, beta;
    gea q;
    fe_beta(&beta);
    odd_table(tab, &zc, t, &beta);
    for (int w = SPN_GLV_WIN - 1; w >= 0; w--) {
        odd_lookup(&q, tab[0], lv_load(u[0][w]), pub, &ny);
        if (w == SPN_GLV_WIN - 1) {
            r->x = q.x;
            r->y = q.y;
            fe_set1(&r->z, 1);
        } else {
            gej_madd_ct(r, r, &q);
        }
        odd_lookup(&q, tab[1], lv_load(u[1][w]), pub, &ny);
        gej_madd_ct(r, r, &q);
        if (w > 0)
            for (int i = 0; i < SPN_GLV_W; i++) gej_dbl(r, r);
    }
    fe_mul(&r->z, &r->z, &zc);
    spn_cleanse(&q, sizeof q);
    spn_cleanse(&ny, sizeof ny);
}

/* ---- fixed base: t·G from precomputed affine multiples ----
 * t' = t, or t + n when t is even, is odd and below 2^257; its regular (all-odd) signed recoding
 * in base 2^GW (Joye–Tunstall) has GWIN digits d_i = 2u_i + 1 − 2^GW, u_i = bits GW·i+1 .. GW·i+GW
 * of t' (the last with its top bit forced: GW·GWIN ≥ 257), so t'·G = Σ d_i·2^(GW·i)·G, and
 * gen_table[i][·][j] holds the coordinates of (2j + 1)·2^(GW·i)·G, j = (|d_i| − 1)/2. No digit is 0,
 * so every step is a real affine addition. Each lane's entry is picked by lv_pick, which reads the
 * whole window: no address depends on t. */
enum { GW = SPN_GEN_W, GWIN = (257 + GW - 1) / GW, GENTRIES = SPN_GEN_ENTRIES };
/* [window][x word 0..3, y word 0..3][entry]: canonical 64-bit words */
static uint64_t gen_table[GWIN][8][GENTRIES] __attribute__((aligned(64)));
static int started;

/* r = start + t'·G for t' in words tw[0..4] (lane-wise); start affine, m ≤ 1. Wipes its copies. */
SPN_EC_FN static void ecmult_gen(ge *r, const gea *start, const spn_lv tw[5]) {
    const spn_lv half = lv_set1(GENTRIES), mask = lv_set1(GENTRIES - 1);
    gea e;
    fe ny;
    spn_lv u, idx, w[8];
    r->x = start->x;
    r->y = start->y;
    fe_set1(&r->z, 1);
    for (int i = 0; i < GWIN; i++) {
        int bit = GW * i + 1, q = bit / 64, sh = bit % 64;
        u = lv_shr(tw[q], (unsigned)sh);
        if (sh > 64 - GW && q < 4) u = lv_or(u, lv_shl(tw[q + 1], (unsigned)(64 - sh)));
        u = lv_and(u, lv_set1(2 * GENTRIES - 1));
        if (i == GWIN - 1) u = lv_or(u, half);
        /* sign bit set: d = 2(u − half) + 1 > 0, entry u − half; clear: d < 0, entry half − 1 − u */
        spn_mask neg = mk_not(lv_test(u, half));
        idx = lv_and(lv_select(neg, u, lv_xor(u, mask)), mask);
        lv_pick(w, (const uint64_t(*)[GENTRIES])gen_table[i], idx);
        fe_from_lv(&e.x, w);
        fe_from_lv(&e.y, w + 4);
        fe_neg(&ny, &e.y, 2);
        fe_select(&e.y, neg, &e.y, &ny);
        ge_madd(r, r, &e);
    }
    spn_cleanse(&e, sizeof e);
    spn_cleanse(&ny, sizeof ny);
    spn_cleanse(&u, sizeof u);
    spn_cleanse(&idx, sizeof idx);
    spn_cleanse(w, sizeof w);
}

/* ---- start-up: the generator table, with this core's own arithmetic ---- */

static const uint64_t GX[4] = {0x59F2815B16F81798ULL, 0x029BFCDB2DCE28D9ULL, 0x55A06295CE870B07ULL,
                               0x79BE667EF9DCBBACULL};
static const uint64_t GY[4] = {0x9C47D08FFB10D4B8ULL, 0xFD17B448A6855419ULL, 0x5DA4FBFC0E1108A8ULL,
                               0x483ADA7726A3C465ULL};

/* Every lane computes the same points (start-up only): window i's entries are e_j = (2j + 1)·B_i with
 * B_i = 2^(GW·i)·G, e_{j+1} = e_j + 2·B_i; each batch of SPN_EC_GROUP entries goes affine at once. */
SPN_EC_FN static int ec_start(void) {
    if (started) return started > 0;
    if (!SPN_EC_CPU()) {
        started = -1;
        return 0;
    }
    ge base, two, e, pts[SPN_EC_GROUP];
    uint64_t wx[SPN_EC_GROUP][4][SPN_LANES], wy[SPN_EC_GROUP][4][SPN_LANES];
    spn_mask inf[SPN_EC_GROUP];
    spn_lv g[8];
    for (int j = 0; j < 4; j++) {
        g[j] = lv_set1(GX[j]);
        g[4 + j] = lv_set1(GY[j]);
    }
    fe_from_lv(&base.x, g);
    fe_from_lv(&base.y, g + 4);
    fe_set1(&base.z, 1);
    for (int i = 0; i < GWIN; i++) {
        ge_dbl(&two, &base);
        e = base;
        for (int j0 = 0; j0 < GENTRIES; j0 += SPN_EC_GROUP) {
            int cnt = GENTRIES - j0 < SPN_EC_GROUP ? GENTRIES - j0 : SPN_EC_GROUP;
            for (int k = 0; k < cnt; k++) {
                pts[k] = e;
                ge_add(&e, &e, &two);
            }
            ge_to_affine_words(pts, cnt, wx, wy, inf);
            for (int k = 0; k < cnt; k++)
                for (int c = 0; c < 4; c++) {
                    gen_table[i][c][j0 + k] = wx[k][c][0];
                    gen_table[i][4 + c][j0 + k] = wy[k][c][0];
                }
        }
        for (int k = 0; k < GW; k++) ge_dbl(&base, &base);
    }
    started = 1;
    return 1;
}

/* ---- the entry points ---- */

static void words_of_be32(uint64_t w[4][SPN_LANES], int lane, const unsigned char be32[32]) {
    for (int j = 0; j < 4; j++) {
        uint64_t x = 0;
        for (int k = 0; k < 8; k++) x = (x << 8) | be32[(3 - j) * 8 + k];
        w[j][lane] = x;
    }
}

static const unsigned char P_BE[32] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                       0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                       0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF, 0xFF, 0xFC, 0x2F};

/* Words of the points' x (and y for width 64) at p[i], the lanes whose prefix and coordinates are in
 * range (bit i), and in *want_odd the lanes whose 33-byte prefix asks for an odd y. Public data. */
static unsigned parse_words(uint64_t wx[4][SPN_LANES], uint64_t wy[4][SPN_LANES], unsigned *want_odd,
                            const unsigned char *const p[SPN_LANES], size_t width) {
    unsigned ok = 0;
    *want_odd = 0;
    memset(wy, 0, 4 * SPN_LANES * sizeof **wy);
    for (int i = 0; i < SPN_LANES; i++) {
        const unsigned char *x = width == 33 ? p[i] + 1 : p[i];
        int good = memcmp(x, P_BE, 32) < 0;
        if (width == 33) {
            good &= p[i][0] == 0x02 || p[i][0] == 0x03;
            *want_odd |= (unsigned)(p[i][0] & 1) << i;
        } else {
            good &= memcmp(p[i] + 32, P_BE, 32) < 0;
            words_of_be32(wy, i, p[i] + 32);
        }
        words_of_be32(wx, i, x);
        ok |= (unsigned)good << i;
    }
    return ok;
}

/* m ≤ FE_CHAINS vectors of points of `width` bytes at p[k][i] to affine x, y (r[k]; m 1, y canonical),
 * their square roots side by side; ok[k] = the lanes of vector k that are points on the curve (bit i).
 * Public data. */
SPN_EC_FN static void parse_vectors(int m, const unsigned char *const p[][SPN_LANES], size_t width, gea *r,
                                    unsigned *ok) {
    uint64_t wx[4][SPN_LANES], wy[4][SPN_LANES];
    unsigned want_odd[FE_CHAINS];
    fe rhs[FE_CHAINS] = {0}, y2, d, ny, seven; /* zeroed: GCC -O1 cannot see that only k < m is read */
    fe_set1(&seven, 7);
    for (int k = 0; k < m; k++) {
        ok[k] = parse_words(wx, wy, &want_odd[k], p[k], width);
        fe_from_words(&r[k].x, wx);
        fe_from_words(&r[k].y, wy);
        fe_sqr(&rhs[k], &r[k].x);
        fe_mul(&rhs[k], &rhs[k], &r[k].x);
        fe_add(&rhs[k], &rhs[k], &seven); /* x³ + 7, m 2 */
    }
    if (width == 33) {
        fe y[FE_CHAINS];
        fe_sqrt_m(m, y, rhs);
        for (int k = 0; k < m; k++) {
            fe_canon(&r[k].y, &y[k]);
            spn_mask flip = mk_xor(fe_is_odd(&r[k].y), mk_bits(want_odd[k]));
            fe_neg(&ny, &r[k].y, 2);
            fe_normw(&ny);
            fe_canon(&ny, &ny);
            fe_select(&r[k].y, flip, &r[k].y, &ny);
        }
    }
    for (int k = 0; k < m; k++) {
        fe_sqr(&y2, &r[k].y);
        fe_sub(&d, &y2, &rhs[k], 3);
        fe_normw(&d);
        ok[k] &= mk_to_bits(fe_is_zero(&d));
    }
}

SPN_EC_FN static void ec_parse_points(const unsigned char *in, size_t width, size_t n, unsigned char (*pt64)[64],
                                      unsigned char *valid) {
    enum { STEP = FE_CHAINS * SPN_LANES };
    for (size_t base = 0; base < n; base += STEP) {
        size_t cnt = n - base < STEP ? n - base : STEP, lane[SPN_LANES];
        int m = (int)((cnt + SPN_LANES - 1) / SPN_LANES);
        const unsigned char *p[FE_CHAINS][SPN_LANES];
        uint64_t wx[4][SPN_LANES], wy[4][SPN_LANES];
        unsigned ok[FE_CHAINS];
        gea pt[FE_CHAINS];
        for (int k = 0; k < m; k++) {
            lanes_of(lane, base, cnt, k);
            for (int i = 0; i < SPN_LANES; i++) p[k][i] = in + lane[i] * width;
        }
        parse_vectors(m, (const unsigned char *const(*)[SPN_LANES])p, width, pt, ok);
        for (int k = 0; k < m; k++) {
            fe_to_words(wx, &pt[k].x);
            fe_to_words(wy, &pt[k].y);
            for (size_t j = 0; j < SPN_LANES && (size_t)k * SPN_LANES + j < cnt; j++) {
                size_t at = base + (size_t)k * SPN_LANES + j;
                put_flag(valid, at, (unsigned char)((ok[k] >> j) & 1));
                put_pt64(pt64[at], wx, wy, (int)j);
            }
        }
    }
}

/* 1 when 0 < s < n, in constant time (s: 4 little-endian words). */
static uint64_t scalar_in_range(const uint64_t s[4]) {
    uint64_t borrow = 0, any = s[0] | s[1] | s[2] | s[3];
    for (int i = 0; i < 4; i++) {
        spn_u128 d = (spn_u128)s[i] - spn_scalar_n[i] - borrow;
        borrow = (uint64_t)(d >> 64) & 1;
    }
    return borrow & ((any | (0 - any)) >> 63);
}

enum { BATCH = SPN_EC_GROUP * SPN_LANES };

/* out33[i] = ser_P(k_i·T_i) for T_i = pt64[i] (first byte 0 when scalar32[i] is 0 or ≥ n, or at
 * infinity), out64[i] the point when out64 is not NULL. secret: k_i = b (recoded in glv) when scalar32
 * is NULL, else b·scalar32[i] mod n, by the constant-time ladder; public (b, glv unused): k_i =
 * scalar32[i], by the variable-time one. Wipes its scratch. */
SPN_EC_FN static void ec_mul_points(int secret, const spn_glv *glv, const uint64_t b[4],
                                    const unsigned char (*pt64)[64], const unsigned char (*scalar32)[32], size_t n,
                                    unsigned char (*out33)[33], unsigned char (*out64)[64]) {
    ge res[SPN_EC_GROUP];
#ifndef SPN_EC_JACOBIAN
    digits_t d[2][SPN_GLV_WIN]; /* the secret ladder's signed digits */
#endif
    uint64_t u[2][SPN_GLV_WIN][SPN_LANES]; /* odd digits */
    uint64_t wx[SPN_EC_GROUP][4][SPN_LANES], wy[SPN_EC_GROUP][4][SPN_LANES], s[4];
    unsigned char bad[BATCH];
    spn_mask inf[SPN_EC_GROUP];
    spn_glv lg;
    /* the odd form, but for the secret ladder of the backends without SPN_EC_JACOBIAN */
#ifdef SPN_EC_JACOBIAN
    const int odd = 1;
#else
    const int odd = !secret;
#endif
    for (size_t base = 0; base < n; base += BATCH) {
        size_t cnt = n - base < BATCH ? n - base : BATCH, lane[SPN_LANES];
        int nv = (int)((cnt + SPN_LANES - 1) / SPN_LANES);
        for (int v = 0; v < nv; v++) {
            gea t;
            lanes_of(lane, base, cnt, v);
            gea_load(&t, pt64, lane);
#ifndef SPN_EC_JACOBIAN
            unsigned neg1 = 0, neg2 = 0;
            memset(d, 0, sizeof d);
#endif
            for (int i = 0; i < SPN_LANES; i++) {
                const spn_glv *g = glv;
                bad[SPN_LANES * v + i] = 0;
                if (scalar32 != NULL) { /* s_i public; b·s_i secret */
                    spn_scalar_from_b32(s, scalar32[lane[i]]);
                    bad[SPN_LANES * v + i] = (unsigned char)!scalar_in_range(s);
                    if (secret) spn_scalar_mul(s, s, b);
                    if (odd)
                        spn_glv_recode_odd(&lg, s);
                    else
                        spn_glv_recode_digits(&lg, s);
                    g = &lg;
                }
                if (odd) {
                    for (int h = 0; h < 2; h++)
                        for (int w = 0; w < SPN_GLV_WIN; w++) u[h][w][i] = g->u[h][w];
                    continue;
                }
#ifndef SPN_EC_JACOBIAN
                neg1 |= (unsigned)g->neg[0] << i;
                neg2 |= (unsigned)g->neg[1] << i;
                for (int h = 0; h < 2; h++)
                    for (int w = 0; w < SPN_GLV_WIN; w++) digit_put(&d[h][w], i, g->d[h][w]);
#endif
            }
            if (odd) {
                ecmult_odd(&res[v], &t, (const uint64_t(*)[SPN_GLV_WIN][SPN_LANES])u, !secret);
                gej_to_projective(&res[v]);
            } else {
#ifndef SPN_EC_JACOBIAN
                ecmult(&res[v], &t, mk_bits(neg1), mk_bits(neg2), (const digits_t(*)[SPN_GLV_WIN])d);
#endif
            }
        }
        ge_to_affine_words(res, nv, wx, wy, inf);
        for (size_t k = 0; k < cnt; k++) {
            size_t v = k / SPN_LANES;
            int i = (int)(k % SPN_LANES);
            put_ser33(out33[base + k], wx[v], wy[v], i, bad[k] | ((mk_to_bits(inf[v]) >> i) & 1));
            if (out64) put_pt64(out64[base + k], wx[v], wy[v], i);
        }
    }
    spn_cleanse(res, sizeof res);
#ifndef SPN_EC_JACOBIAN
    spn_cleanse(d, sizeof d);
#endif
    spn_cleanse(u, sizeof u);
    spn_cleanse(wx, sizeof wx);
    spn_cleanse(wy, sizeof wy);
    spn_cleanse(s, sizeof s);
    spn_cleanse(&lg, sizeof lg);
}

SPN_EC_FN static void ec_shared_secrets(const spn_glv *glv, const uint64_t b[4], const unsigned char (*pt64)[64],
                                        const unsigned char (*scalar32)[32], size_t n, unsigned char (*ecdh33)[33],
                                        unsigned char (*out64)[64]) {
    ec_mul_points(1, glv, b, pt64, scalar32, n, ecdh33, out64);
}

SPN_EC_FN static void ec_tweaks(const unsigned char (*pt64)[64], const unsigned char (*scalar32)[32], size_t n,
                                unsigned char (*tweak33)[33], unsigned char (*out64)[64]) {
    ec_mul_points(0, NULL, NULL, pt64, scalar32, n, tweak33, out64);
}

SPN_EC_FN static void ec_spend_points(const unsigned char spend64[64], const unsigned char (*t32)[32], size_t n,
                                      unsigned char (*pk64)[64], unsigned char (*p33)[33]) {
    ge res[SPN_EC_GROUP];
    gea start;
    uint64_t wx[SPN_EC_GROUP][4][SPN_LANES], wy[SPN_EC_GROUP][4][SPN_LANES], tw[5][SPN_LANES], t[4];
    spn_lv tv[5];
    unsigned char bad[BATCH];
    spn_mask inf[SPN_EC_GROUP];
    size_t same[SPN_LANES] = {0};
    gea_load(&start, (const unsigned char(*)[64])spend64, same);
    for (size_t base = 0; base < n; base += BATCH) {
        size_t cnt = n - base < BATCH ? n - base : BATCH, lane[SPN_LANES];
        int nv = (int)((cnt + SPN_LANES - 1) / SPN_LANES);
        for (int v = 0; v < nv; v++) {
            lanes_of(lane, base, cnt, v);
            for (int i = 0; i < SPN_LANES; i++) {
                spn_scalar_from_b32(t, t32[lane[i]]);
                bad[SPN_LANES * v + i] = (unsigned char)!scalar_in_range(t);
                uint64_t even = (t[0] & 1) - 1; /* all ones when t is even: use t + n */
                spn_u128 acc = 0;
                for (int j = 0; j < 4; j++) {
                    acc += (spn_u128)t[j] + (spn_scalar_n[j] & even);
                    tw[j][i] = (uint64_t)acc;
                    acc >>= 64;
                }
                tw[4][i] = (uint64_t)acc;
            }
            for (int j = 0; j < 5; j++) tv[j] = lv_load(tw[j]);
            ecmult_gen(&res[v], &start, tv);
        }
        ge_to_affine_words(res, nv, wx, wy, inf);
        for (size_t k = 0; k < cnt; k++) {
            size_t v = k / SPN_LANES;
            int i = (int)(k % SPN_LANES);
            put_ser33(p33[base + k], wx[v], wy[v], i, bad[k] | ((mk_to_bits(inf[v]) >> i) & 1));
            put_pt64(pk64[base + k], wx[v], wy[v], i);
        }
    }
    spn_cleanse(res, sizeof res);
    spn_cleanse(tw, sizeof tw);
    spn_cleanse(tv, sizeof tv);
    spn_cleanse(t, sizeof t);
    spn_cleanse(wx, sizeof wx);
    spn_cleanse(wy, sizeof wy);
}

/* Write the sums of a batch: res[q] is P-vector pv[q] plus label lab[q]. Wipes its copies. */
SPN_EC_FN static void flush_sums(ge *res, int nq, const size_t *pv, const size_t *lab, size_t n, size_t n_labels,
                                 unsigned char (*sums33)[33]) {
    uint64_t wx[SPN_EC_GROUP][4][SPN_LANES], wy[SPN_EC_GROUP][4][SPN_LANES];
    spn_mask inf[SPN_EC_GROUP];
    ge_to_affine_words(res, nq, wx, wy, inf);
    for (int q = 0; q < nq; q++)
        for (size_t k = 0; k < SPN_LANES && pv[q] * SPN_LANES + k < n; k++)
            put_ser33(sums33[(pv[q] * SPN_LANES + k) * n_labels + lab[q]], wx[q], wy[q], (int)k,
                      (mk_to_bits(inf[q]) >> k) & 1);
    spn_cleanse(wx, sizeof wx);
    spn_cleanse(wy, sizeof wy);
}

SPN_EC_FN static void ec_label_sums(const unsigned char (*pk64)[64], size_t n, const unsigned char (*label64)[64],
                                    size_t n_labels, unsigned char (*sums33)[33]) {
    ge res[SPN_EC_GROUP], p;
    gea pa, l;
    size_t pv[SPN_EC_GROUP], lab[SPN_EC_GROUP];
    int nq = 0;
    for (size_t v = 0; v * SPN_LANES < n; v++) {
        size_t lane[SPN_LANES];
        lanes_of(lane, v * SPN_LANES, n - v * SPN_LANES < SPN_LANES ? n - v * SPN_LANES : SPN_LANES, 0);
        gea_load(&pa, pk64, lane);
        p.x = pa.x;
        p.y = pa.y;
        fe_set1(&p.z, 1);
        for (size_t m = 0; m < n_labels; m++) {
            size_t same[SPN_LANES];
            for (int i = 0; i < SPN_LANES; i++) same[i] = m;
            gea_load(&l, label64, same);
            ge_madd(&res[nq], &p, &l);
            pv[nq] = v;
            lab[nq++] = m;
            if (nq == SPN_EC_GROUP) {
                flush_sums(res, nq, pv, lab, n, n_labels, sums33);
                nq = 0;
            }
        }
    }
    if (nq) flush_sums(res, nq, pv, lab, n, n_labels, sums33);
    spn_cleanse(res, sizeof res);
    spn_cleanse(&p, sizeof p);
    spn_cleanse(&pa, sizeof pa);
}

/* ---- sums of public keys: the A of many transactions at once ---- */

/* The generator, serialized: what an idle lane parses (its result is never used). */
static const unsigned char G33[33] = {0x02, 0x79, 0xBE, 0x66, 0x7E, 0xF9, 0xDC, 0xBB, 0xAC, 0x55, 0xA0,
                                      0x62, 0x95, 0xCE, 0x87, 0x0B, 0x07, 0x02, 0x9B, 0xFC, 0xDB, 0x2D,
                                      0xCE, 0x28, 0xD9, 0x59, 0xF2, 0x81, 0x5B, 0x16, 0xF8, 0x17, 0x98};

/* Each lane sums one transaction's keys: step s parses every lane's key s (its (s+1)-th) and adds it
 * where it is a point (complete formulas: a running sum may pass through infinity). A chunk's
 * transactions go to the lanes by key count, so the lanes of a vector have about as many steps. */
SPN_EC_FN static void ec_key_sums(const unsigned char (*keys33)[33], const size_t *first, size_t n,
                                  unsigned char (*sum64)[64], unsigned char *found) {
    ge res[SPN_EC_GROUP], sum;
    gea q[FE_CHAINS];
    uint64_t wx[SPN_EC_GROUP][4][SPN_LANES], wy[SPN_EC_GROUP][4][SPN_LANES];
    spn_mask inf[SPN_EC_GROUP];
    size_t order[BATCH];
    unsigned any[SPN_EC_GROUP];
    for (size_t base = 0; base < n; base += BATCH) {
        size_t cnt = n - base < BATCH ? n - base : BATCH;
        int nv = (int)((cnt + SPN_LANES - 1) / SPN_LANES);
        for (size_t k = 0; k < cnt; k++) { /* insertion sort by key count (public) */
            size_t t = base + k, j = k, c = first[t + 1] - first[t];
            for (; j > 0 && first[order[j - 1] + 1] - first[order[j - 1]] > c; j--) order[j] = order[j - 1];
            order[j] = t;
        }
        for (int v0 = 0; v0 < nv; v0 += FE_CHAINS) { /* FE_CHAINS vectors at a time: square roots side by side */
            int m = nv - v0 < FE_CHAINS ? nv - v0 : FE_CHAINS;
            size_t tx[FE_CHAINS][SPN_LANES], steps[FE_CHAINS] = {0}; /* zeroed: GCC cannot see that m ≥ 1 */
            for (int k = 0; k < m; k++) {
                ge_set_infinity(&res[v0 + k]);
                any[v0 + k] = 0;
                steps[k] = 0;
                for (int i = 0; i < SPN_LANES; i++) {
                    size_t at = (size_t)(v0 + k) * SPN_LANES + (size_t)i;
                    tx[k][i] = order[at < cnt ? at : cnt - 1];
                    if (first[tx[k][i] + 1] - first[tx[k][i]] > steps[k]) steps[k] = first[tx[k][i] + 1] - first[tx[k][i]];
                }
            }
            for (size_t st = 0; st < steps[m - 1]; st++) { /* the last vector has the most steps (sorted) */
                const unsigned char *p[FE_CHAINS][SPN_LANES];
                unsigned active[FE_CHAINS], ok[FE_CHAINS];
                int vs[FE_CHAINS], mm = 0;
                for (int k = 0; k < m; k++) {
                    if (st >= steps[k]) continue;
                    active[mm] = 0;
                    for (int i = 0; i < SPN_LANES; i++) {
                        size_t t = tx[k][i];
                        int has = st < first[t + 1] - first[t];
                        p[mm][i] = has ? keys33[first[t] + st] : G33;
                        active[mm] |= (unsigned)has << i;
                    }
                    vs[mm++] = v0 + k;
                }
                parse_vectors(mm, (const unsigned char *const(*)[SPN_LANES])p, 33, q, ok);
                for (int k = 0; k < mm; k++) {
                    ge *r = &res[vs[k]];
                    unsigned use = ok[k] & active[k];
                    ge_madd(&sum, r, &q[k]);
                    spn_mask msk = mk_bits(use);
                    fe_select(&r->x, msk, &r->x, &sum.x);
                    fe_select(&r->y, msk, &r->y, &sum.y);
                    fe_select(&r->z, msk, &r->z, &sum.z);
                    any[vs[k]] |= use;
                }
            }
        }
        ge_to_affine_words(res, nv, wx, wy, inf);
        for (size_t k = 0; k < cnt; k++) {
            size_t v = k / SPN_LANES;
            int i = (int)(k % SPN_LANES);
            put_flag(found, order[k], (unsigned char)((any[v] >> i) & ~(mk_to_bits(inf[v]) >> i) & 1));
            put_pt64(sum64[order[k]], wx[v], wy[v], i);
        }
    }
}

/* ---- field tests ---- */

SPN_EC_FN static void ec_fe_test(int op, const uint64_t *a, const uint64_t *b, size_t n, unsigned char (*out32)[32]) {
    for (size_t base = 0; base < n; base += SPN_LANES) {
        uint64_t ra[SPN_FE_RAW_LIMBS][SPN_LANES], rb[SPN_FE_RAW_LIMBS][SPN_LANES], w[4][SPN_LANES];
        fe x, y, r;
        for (int i = 0; i < SPN_LANES; i++) {
            size_t k = base + (size_t)i < n ? base + (size_t)i : n - 1;
            for (int j = 0; j < SPN_FE_RAW_LIMBS; j++) {
                ra[j][i] = a[k * SPN_FE_RAW_LIMBS + (size_t)j];
                rb[j][i] = b[k * SPN_FE_RAW_LIMBS + (size_t)j];
            }
        }
        fe_from_raw(&x, ra);
        fe_from_raw(&y, rb);
        switch (op) {
        case SPN_FE_MUL: fe_mul(&r, &x, &y); break;
        case SPN_FE_SQR: fe_sqr(&r, &x); break;
        case SPN_FE_INV: fe_inv(&r, &x); break;
        case SPN_FE_SQRT: fe_sqrt(&r, &x); break;
        case SPN_FE_ADD: fe_add(&r, &x, &y); break;
        case SPN_FE_SUB: fe_sub(&r, &x, &y, 2); break;
        case SPN_FE_NEG: fe_neg(&r, &x, 2); break;
        case SPN_FE_MUL8:
        case SPN_FE_SQR8:
            for (int i = 0; i < 3; i++) { /* m 2, 4, 8 */
                fe_add(&x, &x, &x);
                fe_add(&y, &y, &y);
            }
            if (op == SPN_FE_MUL8) fe_mul(&r, &x, &y);
            else fe_sqr(&r, &x);
            break;
        default: fe_mul_small(&r, &x, 21); break;
        }
        fe_normw(&r);
        fe_canon(&r, &r);
        fe_to_words(w, &r);
        for (size_t i = 0; i < SPN_LANES && base + i < n; i++) put_be32(out32[base + i], w, (int)i);
    }
}

/* ---- point tests: the additions' exceptional cases, which whole operations reach rarely or never ---- */

SPN_EC_FN static void ec_ge_test(int op, const unsigned char (*p96)[96], const unsigned char (*q64)[64], size_t n,
                                 unsigned char (*out64)[64], unsigned char *inf) {
    for (size_t base = 0; base < n; base += SPN_LANES) {
        uint64_t w[3][4][SPN_LANES], wx[1][4][SPN_LANES], wy[1][4][SPN_LANES];
        size_t lane[SPN_LANES];
        ge p, r;
        gea q;
        spn_mask at_inf;
        lanes_of(lane, base, n - base, 0);
        for (int c = 0; c < 3; c++) coord_words(w[c], *p96, 96, lane, 32 * (size_t)c);
        fe_from_words(&p.x, w[0]);
        fe_from_words(&p.y, w[1]);
        fe_from_words(&p.z, w[2]);
        gea_load(&q, q64, lane);
        if (op == SPN_GE_MADD_CT) {
            gej_madd_ct(&r, &p, &q);
            gej_to_projective(&r);
        } else {
            ge_madd(&r, &p, &q);
        }
        ge_to_affine_words(&r, 1, wx, wy, &at_inf);
        for (size_t i = 0; i < SPN_LANES && base + i < n; i++) {
            put_pt64(out64[base + i], wx[0], wy[0], (int)i);
            put_flag(inf, base + i, (unsigned char)((mk_to_bits(at_inf) >> i) & 1));
        }
    }
}

const spn_ec_core SPN_EC_CORE = {
    SPN_EC_LABEL, SPN_LANES, SPN_EC_CPU, ec_start, ec_parse_points, ec_shared_secrets, ec_spend_points,
    ec_label_sums, ec_key_sums, ec_tweaks, ec_fe_test, ec_ge_test, SPN_FE_RAW_BITS, SPN_FE_RAW_LIMBS,
};
