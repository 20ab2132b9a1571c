/* Scanning (BIP352 receiver): t_k, P_k and the two label strategies, mirroring sp_scan/scan.py.
 *
 * Match rule, per k: a remaining output with x == x(P_k) matches unlabelled; otherwise the FIRST
 * remaining output (given order) with O − P_k or −O − P_k in the label table matches with that
 * label (O lifted to even Y, O − P_k tried first). Stop at the first k without a match or at K_max.
 *
 * BIP strategy: per k, two point additions per remaining output (2N).
 * Label-set strategy: per k, x(P_k + L_m) for every label, looked up among the outputs' x (L).
 * O − P_k = L ⟺ P_k + L = O (even Y) and −O − P_k = L ⟺ P_k + L = −O (odd Y), so for each output
 * the label-set hit with an even-Y P_k + L is the one the BIP order finds first. */
#include "core.h"

#include <stdlib.h>

#include "sha256.h"

int spn_label_strategy = SPN_STRATEGY_AUTO;

void spn_t_k(const spn_sha256 *base, uint32_t k, unsigned char t_k32[32]) {
    spn_sha256 h = *base;
    const unsigned char ser_k[4] = {(unsigned char)(k >> 24), (unsigned char)(k >> 16), (unsigned char)(k >> 8),
                                    (unsigned char)k};
    spn_sha256_write(&h, ser_k, 4);
    spn_sha256_finalize(&h, t_k32); /* wipes h */
}

/* ---- scanner ---- */

typedef struct {
    unsigned char ser[33];
    uint32_t index;
} label_entry;

static int cmp_label(const void *a, const void *b) {
    return memcmp(((const label_entry *)a)->ser, ((const label_entry *)b)->ser, 33);
}

void spn_scanner_free(spn_scanner *sc) {
    if (sc->label_tweak) spn_cleanse(sc->label_tweak, sc->n_labels * 32);
    free(sc->label_point);
    free(sc->label_tweak);
    free(sc->label_m);
    free(sc->sorted_ser);
    free(sc->sorted_index);
    spn_cleanse(sc, sizeof *sc);
}

int spn_scanner_init(spn_scanner *sc, const unsigned char scan_key32[32], const unsigned char spend33[33],
                     size_t n_labels, const uint32_t *m, const unsigned char (*label33)[33],
                     const unsigned char (*tweak32)[32]) {
    size_t n = n_labels ? n_labels : 1;
    memset(sc, 0, sizeof *sc);
    if (!spn_secp.ec_seckey_verify(spn_ctx.public, scan_key32) || !spn_parse33(spn_ctx.public, &sc->spend, spend33))
        return SPN_EKEY;
    memcpy(sc->scan_key32, scan_key32, 32);
    sc->n_labels = n_labels;
    sc->label_point = malloc(n * sizeof *sc->label_point);
    sc->label_tweak = malloc(n * sizeof *sc->label_tweak);
    sc->label_m = malloc(n * sizeof *sc->label_m);
    sc->sorted_ser = malloc(n * sizeof *sc->sorted_ser);
    sc->sorted_index = malloc(n * sizeof *sc->sorted_index);
    if (!sc->label_point || !sc->label_tweak || !sc->label_m || !sc->sorted_ser || !sc->sorted_index) {
        spn_scanner_free(sc);
        return SPN_ENOMEM;
    }
    for (size_t i = 0; i < n_labels; i++) {
        if (!spn_parse33(spn_ctx.public, &sc->label_point[i], label33[i]) ||
            !spn_secp.ec_seckey_verify(spn_ctx.public, tweak32[i])) {
            spn_scanner_free(sc);
            return SPN_EKEY;
        }
        memcpy(sc->label_tweak[i], tweak32[i], 32);
        sc->label_m[i] = m[i];
    }
    label_entry *entries = malloc(n * sizeof *entries);
    if (entries == NULL) {
        spn_scanner_free(sc);
        return SPN_ENOMEM;
    }
    for (size_t i = 0; i < n_labels; i++) {
        memcpy(entries[i].ser, label33[i], 33);
        entries[i].index = (uint32_t)i;
    }
    qsort(entries, n_labels, sizeof *entries, cmp_label);
    for (size_t i = 0; i < n_labels; i++) {
        memcpy(sc->sorted_ser[i], entries[i].ser, 33);
        sc->sorted_index[i] = entries[i].index;
    }
    free(entries);
    return 1;
}

/* Given index of the label whose ser_P is ser33, or -1. */
static long label_lookup(const spn_scanner *sc, const unsigned char ser33[33]) {
    size_t lo = 0, hi = sc->n_labels;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = memcmp(sc->sorted_ser[mid], ser33, 33);
        if (c == 0) return sc->sorted_index[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* ---- the outputs of one tx ---- */

typedef struct {
    const unsigned char *x;
    uint32_t index;
} x_entry;

typedef struct {
    const unsigned char *const *x; /* the given x-only outputs */
    size_t n;
    x_entry *sorted;              /* sorted by (x, index) */
    unsigned char *removed;       /* 1 once matched */
    unsigned char *lifted_state;  /* BIP strategy: 0 not yet, 1 valid, 2 off the curve */
    secp256k1_pubkey *lifted;
} outputs_t;

static int cmp_output(const void *a, const void *b) {
    const x_entry *i = a, *j = b;
    int c = memcmp(i->x, j->x, 32);
    return c ? c : (i->index > j->index) - (i->index < j->index);
}

/* The first remaining output (lowest index) whose x is x32, or -1. */
static long find_x(const outputs_t *o, const unsigned char x32[32]) {
    size_t lo = 0, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(o->sorted[mid].x, x32, 32) < 0) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < o->n && memcmp(o->sorted[lo].x, x32, 32) == 0; lo++)
        if (!o->removed[o->sorted[lo].index]) return o->sorted[lo].index;
    return -1;
}

/* Label-set: (index, label) of the first remaining output with x == x(P_k + L_m) for some m. */
static long match_labelset(const spn_scanner *sc, const outputs_t *o, const secp256k1_pubkey *p_k, long *label) {
    long best = -1;
    int best_even = 0;
    for (size_t m = 0; m < sc->n_labels; m++) {
        secp256k1_pubkey q;
        const secp256k1_pubkey *pair[2] = {p_k, &sc->label_point[m]};
        unsigned char q33[33];
        if (!spn_secp.ec_pubkey_combine(spn_ctx.public, &q, pair, 2)) continue;
        spn_ser33(spn_ctx.public, q33, &q);
        long i = find_x(o, q33 + 1);
        int even = q33[0] == 0x02;
        if (i < 0) continue;
        if (best < 0 || i < best || (i == best && even && !best_even)) {
            best = i;
            best_even = even;
            *label = (long)m;
        }
    }
    return best;
}

/* BIP: (index, label) of the first remaining output O with O − P_k or −O − P_k a label. */
static long match_bip(const spn_scanner *sc, outputs_t *o, const secp256k1_pubkey *p_k, long *label) {
    secp256k1_pubkey neg_p_k = *p_k;
    spn_secp.ec_pubkey_negate(spn_ctx.public, &neg_p_k);
    for (size_t i = 0; i < o->n; i++) {
        if (o->removed[i]) continue;
        if (o->lifted_state[i] == 0)
            o->lifted_state[i] = spn_lift_x(spn_ctx.public, &o->lifted[i], o->x[i]) ? 1 : 2;
        if (o->lifted_state[i] != 1) continue;
        secp256k1_pubkey d;
        unsigned char d33[33];
        const secp256k1_pubkey *minus[2] = {&o->lifted[i], &neg_p_k};
        if (spn_secp.ec_pubkey_combine(spn_ctx.public, &d, minus, 2)) {
            spn_ser33(spn_ctx.public, d33, &d);
            if ((*label = label_lookup(sc, d33)) >= 0) return (long)i;
        }
        /* −O − P_k = −(O + P_k): the same point with the other parity. */
        const secp256k1_pubkey *plus[2] = {&o->lifted[i], p_k};
        if (spn_secp.ec_pubkey_combine(spn_ctx.public, &d, plus, 2)) {
            spn_ser33(spn_ctx.public, d33, &d);
            d33[0] ^= 1;
            if ((*label = label_lookup(sc, d33)) >= 0) return (long)i;
        }
    }
    return -1;
}

static int use_labelset(const spn_scanner *sc, size_t n_outputs) {
    if (spn_label_strategy != SPN_STRATEGY_AUTO) return spn_label_strategy == SPN_STRATEGY_LABELSET;
    return sc->n_labels <= 2 * n_outputs;
}

int spn_scan_ecdh(const spn_scanner *sc, const unsigned char ecdh33[33], const unsigned char *const *outputs32,
                  size_t n, spn_found *found) {
    outputs_t o = {outputs32, n, NULL, NULL, NULL, NULL};
    int labelset = use_labelset(sc, n), n_found = 0;
    spn_sha256 base;
    unsigned char t_k[32], p33[33];
    if (n == 0) return 0;
    o.sorted = malloc(n * sizeof *o.sorted);
    o.removed = calloc(n, 1);
    if (!labelset) {
        o.lifted_state = calloc(n, 1);
        o.lifted = malloc(n * sizeof *o.lifted);
    }
    if (!o.sorted || !o.removed || (!labelset && (!o.lifted_state || !o.lifted))) {
        n_found = SPN_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        o.sorted[i].x = outputs32[i];
        o.sorted[i].index = (uint32_t)i;
    }
    qsort(o.sorted, n, sizeof *o.sorted, cmp_output);

    spn_sha256_init_tagged(&base, SPN_TAG_SHARED_SECRET);
    spn_sha256_write(&base, ecdh33, 33);
    for (uint32_t k = 0; k < SPN_K_MAX && (size_t)n_found < n; k++) {
        secp256k1_pubkey t_g, p_k;
        const secp256k1_pubkey *pair[2] = {&sc->spend, &t_g};
        long index, label = -1;
        spn_t_k(&base, k, t_k);
        /* P_k = B_spend + t_k·G, t_k·G in constant time (t_k spends the output). */
        if (!spn_secp.ec_pubkey_create(spn_ctx.public, &t_g, t_k) ||
            !spn_secp.ec_pubkey_combine(spn_ctx.public, &p_k, pair, 2))
            break;
        spn_ser33(spn_ctx.public, p33, &p_k);
        index = find_x(&o, p33 + 1);
        if (index < 0 && sc->n_labels)
            index = labelset ? match_labelset(sc, &o, &p_k, &label) : match_bip(sc, &o, &p_k, &label);
        if (index < 0) break;
        spn_found *f = &found[n_found++];
        f->index = (uint32_t)index;
        memcpy(f->tweak32, t_k, 32);
        f->label = -1;
        if (label >= 0) {
            f->label = sc->label_m[label];
            /* (t_k + ℓ_m) mod n; 0 (probability 2^-256) is written as 32 zero bytes like the reference. */
            if (!spn_secp.ec_seckey_tweak_add(spn_ctx.public, f->tweak32, sc->label_tweak[label]))
                memset(f->tweak32, 0, 32);
        }
        o.removed[index] = 1;
    }
done:
    spn_cleanse(&base, sizeof base);
    spn_cleanse(t_k, sizeof t_k);
    free(o.sorted);
    free(o.removed);
    free(o.lifted_state);
    free(o.lifted);
    return n_found;
}

int spn_scan_summary(const spn_scanner *sc, const spn_summary *s, const unsigned char *const *outputs32, size_t n,
                     spn_found *found) {
    unsigned char scalar32[32], ecdh33[33];
    int ret = 0;
    memcpy(scalar32, sc->scan_key32, 32);
    /* (b_scan·input_hash)·A: one constant-time point multiplication instead of two. */
    if (spn_secp.ec_seckey_tweak_mul(spn_ctx.public, scalar32, s->input_hash32) &&
        spn_ecdh33(spn_ctx.public, ecdh33, &s->sum, scalar32))
        ret = spn_scan_ecdh(sc, ecdh33, outputs32, n, found);
    spn_cleanse(scalar32, sizeof scalar32);
    spn_cleanse(ecdh33, sizeof ecdh33);
    return ret;
}
