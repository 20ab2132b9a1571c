/* Scanning (BIP352 receiver): t_k, P_k and the two label strategies, mirroring sp_scan/scan.py.
 *
 * Match rule, per k (BIP352's loop, and libsecp256k1's silentpayments module): the remaining outputs
 * are tried in their given order, each directly, then with the labels, before the next one. The
 * first output O with x(O) == x(P_k) matches unlabelled, or with O − P_k or −O − P_k a label L_m
 * (O lifted to even Y, O − P_k tried first) matches with label m, whichever output comes first; an
 * output that is both is the direct match. So a labelled output before an unlabelled one of the
 * same k wins. A matched output is removed (libsecp keeps it in its list, which finds the same: one
 * output matching two values of k would take a discrete logarithm to build); scanning stops at the
 * first k without a match, or at K_max.
 *
 * BIP strategy: per k, two point additions per remaining output before the direct match (2N).
 * Label-set strategy: per k, x(P_k + L_m) for every label, looked up among the outputs' x (L).
 * O − P_k = L ⟺ P_k + L = O (even Y) and −O − P_k = L ⟺ P_k + L = −O (odd Y), so for each output
 * the label-set hit with an even-Y P_k + L is the one the BIP order finds first. Either strategy
 * skips the labels when the direct match is the first remaining output.
 *
 * Batches: a slice of txs per thread, SPN_GROUP txs at a time. The group's shared secrets come from
 * one engine call; then rounds: every tx still scanning computes its next t_k, one engine call
 * gives all P_k, the label-set txs' P_k + L_m come from another. A tx leaves the rounds at its
 * first k without a match, so round 0 holds the whole group and later rounds only txs that paid. */
#include "core.h"

#include <pthread.h>
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
    spn_scalar_from_b32(sc->scan_key_words, scan_key32);
    spn_glv_recode(&sc->scan_key_glv, sc->scan_key_words);
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
    const unsigned char *const *x; /* the given x-only outputs */
    const uint64_t (*xw)[4];      /* the same, as words side by side for spn_match_x */
    size_t n;
    unsigned char *removed;       /* 1 once matched */
    unsigned char *lifted_state;  /* BIP strategy: 0 not yet, 1 valid, 2 off the curve */
    secp256k1_pubkey *lifted;
} outputs_t;

/* All ones when bit 0 of b is set, else 0, through an empty asm the compiler cannot see into, so it cannot
 * turn the masks built from it back into branches. */
static uint64_t word_of_bit(uint64_t b) {
    uint64_t w = 0 - (b & 1);
    __asm__("" : "+r"(w));
    return w;
}

long spn_match_x(const uint64_t (*x)[4], const unsigned char *removed, size_t n, const unsigned char x32[32],
                 uint64_t live) {
    uint64_t c[4], found = 0, at = 0, any = word_of_bit(live);
    memcpy(c, x32, 32);
    for (size_t i = 0; i < n; i++) {
        uint64_t d = (x[i][0] ^ c[0]) | (x[i][1] ^ c[1]) | (x[i][2] ^ c[2]) | (x[i][3] ^ c[3]) | removed[i];
        uint64_t hit = word_of_bit(((d | (0 - d)) >> 63) ^ 1) & any & ~found;
        at |= hit & i;
        found |= hit;
    }
    spn_cleanse(c, sizeof c);
    return found ? (long)at : -1;
}

/* The lowest remaining index, or n when none remains. */
static size_t first_left(const outputs_t *o) {
    size_t i = 0;
    while (i < o->n && o->removed[i]) i++;
    return i;
}

/* Label-set: (index, label) of the first remaining output before `limit` with x == x(P_k + L_m) for
 * some m, given sums33[m] = ser_P(P_k + L_m) (first byte 0 at infinity); -1 when none. */
static long match_labelset(const spn_scanner *sc, const outputs_t *o, const unsigned char (*sums33)[33], size_t limit,
                           long *label) {
    long best = -1;
    int best_even = 0;
    for (size_t m = 0; m < sc->n_labels; m++) {
        long i = spn_match_x(o->xw, o->removed, limit, sums33[m] + 1, sums33[m][0] != 0); /* 0: infinity */
        if (i < 0) continue;
        int even = sums33[m][0] == 0x02;
        if (best < 0 || i < best || (i == best && even && !best_even)) {
            best = i;
            best_even = even;
            *label = (long)m;
        }
    }
    return best;
}

/* BIP: (index, label) of the first remaining output O before `limit` with O − P_k or −O − P_k a
 * label; -1 when none. */
static long match_bip(const spn_scanner *sc, outputs_t *o, const secp256k1_pubkey *p_k, size_t limit, long *label) {
    secp256k1_pubkey neg_p_k = *p_k;
    spn_secp.ec_pubkey_negate(spn_ctx.public, &neg_p_k);
    for (size_t i = 0; i < limit; i++) {
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

/* ---- the batch ---- */

typedef struct {
    size_t tx;
    outputs_t o;
    int labelset, active;
    uint32_t k;             /* outputs found so far (= the next k) */
    spn_sha256 base;        /* has absorbed ser_P(ecdh): secret, wiped */
    spn_batch_found *found; /* room for min(n, K_MAX) */
} lane_t;

/* A worker's scratch for one group, reused from group to group. */
typedef struct {
    lane_t lanes[SPN_GROUP];
    secp256k1_pubkey points[SPN_GROUP], p_k[SPN_GROUP], ls_p_k[SPN_GROUP];
    unsigned char scalars[SPN_GROUP][32], ecdh33[SPN_GROUP][33], t_k[SPN_GROUP][32], p33[SPN_GROUP][33];
    size_t idx[SPN_GROUP], ls[SPN_GROUP];
    long direct[SPN_GROUP]; /* per lane of the round: the direct match's index, or -1 */
    uint64_t (*xw)[4];
    unsigned char *removed, *lifted_state;
    secp256k1_pubkey *lifted;
    spn_batch_found *found;
    unsigned char (*sums33)[33];
    size_t cap_xw, cap_removed, cap_lifted_state, cap_lifted, cap_found, cap_sums;
} group_t;

typedef struct {
    const spn_scanner *sc;
    const spn_batch *b;
    size_t lo, hi;
    spn_batch_found *found; /* this slice's results, tx order */
    size_t n_found, cap_found;
    long ret;
    size_t bad;
} slice_t;

static int reserve(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 1;
    void *q = malloc(need * size);
    if (q == NULL) return 0;
    free(*p);
    *p = q;
    *cap = need;
    return 1;
}

/* reserve() keeping the contents, for buffers of found tweaks: the old one is wiped before free. */
static int reserve_wiped(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 1;
    size_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *q = malloc(cap2 * size);
    if (q == NULL) return 0;
    if (*p) {
        memcpy(q, *p, *cap * size);
        spn_cleanse(*p, *cap * size);
        free(*p);
    }
    *p = q;
    *cap = cap2;
    return 1;
}

static size_t room_of(size_t n) { return n < SPN_K_MAX ? n : SPN_K_MAX; }

/* Record the outcome of lane l's round with t_k: a match at `index` (with `label` or -1), or none
 * (index < 0). Returns 1 when the lane stops scanning. */
static int settle(const spn_scanner *sc, lane_t *l, long index, long label, const unsigned char t_k32[32]) {
    if (index < 0) {
        l->active = 0;
        return 1;
    }
    spn_batch_found *f = &l->found[l->k++];
    f->tx = l->tx;
    f->index = (uint32_t)index;
    memcpy(f->tweak32, t_k32, 32);
    f->label = -1;
    if (label >= 0) {
        f->label = sc->label_m[label];
        /* (t_k + ℓ_m) mod n; 0 (probability 2^-256) is written as 32 zero bytes like the reference. */
        if (!spn_secp.ec_seckey_tweak_add(spn_ctx.public, f->tweak32, sc->label_tweak[label])) memset(f->tweak32, 0, 32);
    }
    l->o.removed[index] = 1;
    if (l->k == l->o.n || l->k == SPN_K_MAX) {
        l->active = 0;
        return 1;
    }
    return 0;
}

/* Give the group's txs with outputs a lane each: point, outputs sorted, room for found outputs.
 * Returns the lane count, SPN_EKEY (s->bad set) or SPN_ENOMEM. */
static long group_lanes(slice_t *s, group_t *g, size_t g0, size_t g1) {
    const spn_batch *b = s->b;
    size_t n_lanes = 0, n_out = 0, n_room = 0, n_lift = 0, bad;
    if (b->tweaks && !spn_engine_active->parse_points(b->tweaks + g0 * b->tweak_width, b->tweak_width, g1 - g0,
                                                      g->points, &bad)) {
        s->bad = g0 + bad;
        return SPN_EKEY;
    }
    for (size_t i = g0; i < g1; i++) {
        size_t n = b->first[i + 1] - b->first[i];
        if (n == 0) continue;
        lane_t *l = &g->lanes[n_lanes];
        memset(l, 0, sizeof *l);
        l->tx = i;
        l->o.n = n;
        l->labelset = use_labelset(s->sc, n);
        /* in place: n_lanes <= i - g0 */
        g->points[n_lanes] = b->tweaks ? g->points[i - g0] : b->sums[i];
        if (!b->tweaks) memcpy(g->scalars[n_lanes], b->input_hash32[i], 32);
        n_out += n;
        n_room += room_of(n);
        n_lift += l->labelset ? 0 : n;
        n_lanes++;
    }
    if (!reserve((void **)&g->xw, &g->cap_xw, n_out, sizeof *g->xw) ||
        !reserve((void **)&g->removed, &g->cap_removed, n_out, 1) ||
        !reserve((void **)&g->lifted_state, &g->cap_lifted_state, n_lift, 1) ||
        !reserve((void **)&g->lifted, &g->cap_lifted, n_lift, sizeof *g->lifted) ||
        !reserve_wiped((void **)&g->found, &g->cap_found, n_room, sizeof *g->found))
        return SPN_ENOMEM;
    size_t off = 0, room = 0, lift = 0;
    for (size_t a = 0; a < n_lanes; a++) {
        lane_t *l = &g->lanes[a];
        size_t n = l->o.n;
        l->o.x = b->outputs32 + b->first[l->tx];
        for (size_t j = 0; j < n; j++) memcpy(g->xw[off + j], l->o.x[j], 32);
        l->o.xw = (const uint64_t(*)[4])(g->xw + off);
        l->o.removed = g->removed + off;
        memset(l->o.removed, 0, n);
        if (!l->labelset) {
            l->o.lifted_state = g->lifted_state + lift;
            l->o.lifted = g->lifted + lift;
            memset(l->o.lifted_state, 0, n);
            lift += n;
        }
        l->found = g->found + room;
        off += n;
        room += room_of(n);
    }
    return (long)n_lanes;
}

/* One round of the lanes still scanning: t_k, P_k, the direct match, then the labels of the outputs
 * before it, which come first. Returns the number of lanes that stopped. */
static size_t group_round(const spn_scanner *sc, group_t *g, size_t n_lanes, size_t per_chunk) {
    const spn_engine *e = spn_engine_active;
    size_t n = 0, n_ls = 0, stopped = 0;
    for (size_t a = 0; a < n_lanes; a++) {
        lane_t *l = &g->lanes[a];
        if (!l->active) continue;
        spn_t_k(&l->base, l->k, g->t_k[n]);
        g->idx[n++] = a;
    }
    e->spend_points(sc, (const unsigned char(*)[32])g->t_k, n, g->p_k, g->p33);
    for (size_t q = 0; q < n; q++) {
        lane_t *l = &g->lanes[g->idx[q]];
        long index = -1, label = -1;
        if (g->p33[q][0] != 0) {
            index = g->direct[q] = spn_match_x(l->o.xw, l->o.removed, l->o.n, g->p33[q] + 1, 1);
            size_t limit = index < 0 ? l->o.n : (size_t)index;
            if (sc->n_labels && first_left(&l->o) < limit) {
                if (l->labelset) {
                    g->ls[n_ls++] = q;
                    continue;
                }
                long hit = match_bip(sc, &l->o, &g->p_k[q], limit, &label);
                if (hit >= 0) index = hit;
            }
        }
        stopped += (size_t)settle(sc, l, index, label, g->t_k[q]);
    }
    for (size_t c = 0; c < n_ls; c += per_chunk) {
        size_t cn = n_ls - c < per_chunk ? n_ls - c : per_chunk;
        for (size_t u = 0; u < cn; u++) g->ls_p_k[u] = g->p_k[g->ls[c + u]];
        e->label_sums(sc, g->ls_p_k, cn, g->sums33);
        for (size_t u = 0; u < cn; u++) {
            size_t q = g->ls[c + u];
            long label = -1;
            lane_t *l = &g->lanes[g->idx[q]];
            size_t limit = g->direct[q] < 0 ? l->o.n : (size_t)g->direct[q];
            long index = match_labelset(sc, &l->o, (const unsigned char(*)[33])g->sums33 + u * sc->n_labels, limit, &label);
            if (index < 0) index = g->direct[q];
            stopped += (size_t)settle(sc, l, index, label, g->t_k[q]);
        }
    }
    spn_cleanse(g->t_k, n * sizeof *g->t_k);
    return stopped;
}

/* Scan txs [g0, g1) and append what they pay to the slice's results. 1, SPN_EKEY or SPN_ENOMEM. */
static long scan_group(slice_t *s, group_t *g, size_t g0, size_t g1, size_t per_chunk) {
    const spn_scanner *sc = s->sc;
    long n_lanes = group_lanes(s, g, g0, g1);
    size_t active = 0, total = 0;
    if (n_lanes < 0) return n_lanes;
    spn_engine_active->shared_secrets(sc, g->points, s->b->tweaks ? NULL : (const unsigned char(*)[32])g->scalars,
                                      (size_t)n_lanes, g->ecdh33);
    for (long a = 0; a < n_lanes; a++) {
        lane_t *l = &g->lanes[a];
        if (g->ecdh33[a][0] == 0) continue;
        spn_sha256_init_tagged(&l->base, SPN_TAG_SHARED_SECRET);
        spn_sha256_write(&l->base, g->ecdh33[a], 33);
        l->active = 1;
        active++;
    }
    spn_cleanse(g->ecdh33, (size_t)n_lanes * sizeof *g->ecdh33);
    while (active) active -= group_round(sc, g, (size_t)n_lanes, per_chunk);
    for (long a = 0; a < n_lanes; a++) {
        spn_cleanse(&g->lanes[a].base, sizeof g->lanes[a].base);
        total += g->lanes[a].k;
    }
    long ret = 1;
    if (!reserve_wiped((void **)&s->found, &s->cap_found, s->n_found + total, sizeof *s->found)) {
        ret = SPN_ENOMEM;
    } else {
        for (long a = 0; a < n_lanes; a++) {
            if (g->lanes[a].k == 0) continue; /* memcpy takes no NULL, even for 0 bytes */
            memcpy(s->found + s->n_found, g->lanes[a].found, g->lanes[a].k * sizeof *s->found);
            s->n_found += g->lanes[a].k;
        }
    }
    if (g->found) spn_cleanse(g->found, g->cap_found * sizeof *g->found);
    return ret;
}

/* Frees a worker's scratch, wiping what derives from t_k (p_k, p33, the label sums). */
static void group_free(group_t *g) {
    free(g->xw);
    free(g->removed);
    free(g->lifted_state);
    free(g->lifted);
    if (g->found) spn_cleanse(g->found, g->cap_found * sizeof *g->found);
    free(g->found);
    if (g->sums33) spn_cleanse(g->sums33, g->cap_sums * sizeof *g->sums33);
    free(g->sums33);
    spn_cleanse(g, sizeof *g);
    free(g);
}

static void *run_slice(void *arg) {
    slice_t *s = arg;
    const spn_scanner *sc = s->sc;
    /* Label-set lanes get their P_k + L_m in chunks of about 4096 sums (at least one lane). */
    size_t per_chunk = sc->n_labels ? 4096 / sc->n_labels : SPN_GROUP;
    if (per_chunk == 0) per_chunk = 1;
    if (per_chunk > SPN_GROUP) per_chunk = SPN_GROUP;
    group_t *g = calloc(1, sizeof *g);
    s->ret = 1;
    if (g == NULL || !reserve((void **)&g->sums33, &g->cap_sums, per_chunk * (sc->n_labels ? sc->n_labels : 1),
                              sizeof *g->sums33)) {
        s->ret = SPN_ENOMEM;
    }
    for (size_t g0 = s->lo; s->ret == 1 && g0 < s->hi; g0 += SPN_GROUP)
        s->ret = scan_group(s, g, g0, s->hi - g0 < SPN_GROUP ? s->hi : g0 + SPN_GROUP, per_chunk);
    if (g) group_free(g);
    return NULL;
}

static void slice_free(slice_t *s) {
    if (s->found) spn_cleanse(s->found, s->cap_found * sizeof *s->found);
    free(s->found);
    s->found = NULL;
}

/* Run fn on each of n slices of `size` bytes at `slices`: slice 0 in the calling thread, the others in
 * threads of their own; a slice whose thread cannot be started runs in the caller too. 1, or
 * SPN_ENOMEM (nothing ran). */
static long run_threads(void *(*fn)(void *), void *slices, size_t size, size_t n) {
    pthread_t *tid = calloc(n, sizeof *tid);
    unsigned char *started = calloc(n, 1);
    unsigned char *at = slices;
    if (!tid || !started) {
        free(tid);
        free(started);
        return SPN_ENOMEM;
    }
    for (size_t t = 1; t < n; t++) started[t] = pthread_create(&tid[t], NULL, fn, at + t * size) == 0;
    fn(at);
    for (size_t t = 1; t < n; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else fn(at + t * size);
    }
    free(tid);
    free(started);
    return 1;
}

/* The thread count for n items: threads clamped to [1, SPN_MAX_THREADS] and to `most`. */
static size_t thread_count(size_t threads, size_t most) {
    if (threads < 1) threads = 1;
    if (threads > SPN_MAX_THREADS) threads = SPN_MAX_THREADS;
    return threads > most ? most : threads;
}

long spn_scan_batch(const spn_scanner *sc, const spn_batch *b, size_t threads, spn_batch_found **out, size_t *bad_tx) {
    slice_t *sl;
    long ret = 0;
    *out = NULL;
    if (b->n == 0) return 0;
    threads = thread_count(threads, b->n);
    if (!(sl = calloc(threads, sizeof *sl))) return SPN_ENOMEM;
    size_t each = b->n / threads, extra = b->n % threads;
    for (size_t t = 0, lo = 0; t < threads; t++) {
        sl[t].sc = sc;
        sl[t].b = b;
        sl[t].lo = lo;
        lo += each + (t < extra);
        sl[t].hi = lo;
    }
    if (run_threads(run_slice, sl, sizeof *sl, threads) != 1) {
        free(sl);
        return SPN_ENOMEM;
    }
    /* The first slice that failed decides: its first bad tx is the batch's first. */
    size_t total = 0;
    for (size_t t = 0; t < threads && ret == 0; t++) {
        if (sl[t].ret != 1) {
            ret = sl[t].ret;
            if (ret == SPN_EKEY) *bad_tx = sl[t].bad;
        }
        total += sl[t].n_found;
    }
    if (ret == 0 && threads == 1) {
        *out = sl[0].found; /* handed over, not copied */
        sl[0].found = NULL;
    } else if (ret == 0 && (*out = malloc((total ? total : 1) * sizeof **out)) == NULL) {
        ret = SPN_ENOMEM;
    } else if (ret == 0) {
        for (size_t t = 0, at = 0; t < threads; t++) {
            if (sl[t].n_found == 0) continue;
            memcpy(*out + at, sl[t].found, sl[t].n_found * sizeof **out);
            at += sl[t].n_found;
        }
    }
    for (size_t t = 0; t < threads; t++) slice_free(&sl[t]);
    free(sl);
    return ret < 0 ? ret : (long)total;
}

/* ---- the k = 0 outputs of many tweaks (light clients' filter lookups) ---- */

typedef struct {
    const spn_scanner *sc;
    const unsigned char *tweaks;
    size_t width, lo, hi;
    unsigned char *out32;
    long ret;
    size_t bad;
} k0_slice_t;

/* Tweaks [g0, g0 + n) of a slice: n <= SPN_GROUP. 1 or SPN_EKEY (s->bad set). */
static long k0_group(k0_slice_t *s, size_t g0, size_t n, unsigned char (*sums33)[33]) {
    const spn_scanner *sc = s->sc;
    const spn_engine *e = spn_engine_active;
    const size_t per = 1 + sc->n_labels;
    secp256k1_pubkey points[SPN_GROUP], p_k[SPN_GROUP];
    unsigned char ecdh33[SPN_GROUP][33], t_0[SPN_GROUP][32], p33[SPN_GROUP][33];
    size_t bad;
    if (!e->parse_points(s->tweaks + g0 * s->width, s->width, n, points, &bad)) {
        s->bad = g0 + bad;
        return SPN_EKEY;
    }
    e->shared_secrets(sc, points, NULL, n, ecdh33);
    for (size_t i = 0; i < n; i++) {
        spn_sha256 base;
        if (ecdh33[i][0] == 0) {
            memset(t_0[i], 0, 32); /* not in [1, n): spend_points marks it */
            continue;
        }
        spn_sha256_init_tagged(&base, SPN_TAG_SHARED_SECRET);
        spn_sha256_write(&base, ecdh33[i], 33);
        spn_t_k(&base, 0, t_0[i]);
        spn_cleanse(&base, sizeof base);
    }
    spn_cleanse(ecdh33, sizeof ecdh33);
    e->spend_points(sc, (const unsigned char(*)[32])t_0, n, p_k, p33);
    spn_cleanse(t_0, sizeof t_0);
    for (size_t i = 0; i < n; i++)
        if (p33[i][0] == 0) p_k[i] = sc->spend; /* any valid point for label_sums; its sums are not used */
    if (sc->n_labels) e->label_sums(sc, p_k, n, sums33);
    for (size_t i = 0; i < n; i++) {
        unsigned char *row = s->out32 + (g0 + i) * per * 32;
        if (p33[i][0] == 0) {
            memset(row, 0, per * 32);
            continue;
        }
        memcpy(row, p33[i] + 1, 32);
        for (size_t m = 0; m < sc->n_labels; m++) {
            const unsigned char *sum = sums33[i * sc->n_labels + m];
            if (sum[0] == 0) memset(row + 32 * (1 + m), 0, 32);
            else memcpy(row + 32 * (1 + m), sum + 1, 32);
        }
    }
    spn_cleanse(p_k, sizeof p_k);
    return 1;
}

static void *run_k0_slice(void *arg) {
    k0_slice_t *s = arg;
    unsigned char (*sums33)[33] = NULL;
    if (s->sc->n_labels && !(sums33 = malloc(SPN_GROUP * s->sc->n_labels * sizeof *sums33))) {
        s->ret = SPN_ENOMEM;
        return NULL;
    }
    s->ret = 1;
    for (size_t g0 = s->lo; s->ret == 1 && g0 < s->hi; g0 += SPN_GROUP)
        s->ret = k0_group(s, g0, s->hi - g0 < SPN_GROUP ? s->hi - g0 : SPN_GROUP, sums33);
    free(sums33);
    return NULL;
}

long spn_k0_outputs(const spn_scanner *sc, const unsigned char *tweaks, size_t width, size_t n, size_t threads,
                    unsigned char *out32, size_t *bad) {
    k0_slice_t *sl;
    if (n == 0) return 1;
    threads = thread_count(threads, (n + SPN_GROUP - 1) / SPN_GROUP);
    if (!(sl = calloc(threads, sizeof *sl))) return SPN_ENOMEM;
    size_t each = n / threads, extra = n % threads;
    for (size_t t = 0, lo = 0; t < threads; t++) {
        sl[t] = (k0_slice_t){sc, tweaks, width, lo, lo + each + (t < extra), out32, 0, 0};
        lo = sl[t].hi;
    }
    long ret = run_threads(run_k0_slice, sl, sizeof *sl, threads);
    for (size_t t = 0; t < threads && ret == 1; t++) { /* the first failing slice holds the lowest bad tweak */
        ret = sl[t].ret;
        if (ret == SPN_EKEY) *bad = sl[t].bad;
    }
    free(sl);
    return ret;
}
