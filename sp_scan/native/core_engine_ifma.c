/* The EC engine on the 8-lane AVX-512 IFMA core (core_ifma.c): the scan key's GLV recoding is the
 * scanner's (computed once), points cross as secp256k1_pubkey, whose layout (x, y little-endian)
 * spn_ifma_start() checked against the bound libsecp256k1 before this engine can be chosen. */
#include "core.h"

/* Below this count (public), one 8-lane vector costs more than libsecp256k1 one point at a time:
 * the single-tx calls (scan_tweak, scan_tx, a block's lone SP tx) stay as fast as before. */
enum { MIN_LANES = 2 };

static unsigned char (*as_pt64(secp256k1_pubkey *p))[64] { return (unsigned char(*)[64])p->data; }
static const unsigned char (*as_cpt64(const secp256k1_pubkey *p))[64] { return (const unsigned char(*)[64])p->data; }

static int ifma_parse_points(const unsigned char *in, size_t width, size_t n, secp256k1_pubkey *points, size_t *bad) {
    unsigned char valid[SPN_GROUP];
    if (n < MIN_LANES) return spn_engine_secp.parse_points(in, width, n, points, bad);
    if (width != 33 && width != 64) {
        *bad = 0;
        return n == 0;
    }
    for (size_t base = 0; base < n; base += SPN_GROUP) {
        size_t cnt = n - base < SPN_GROUP ? n - base : SPN_GROUP;
        spn_ifma_parse_points(in + base * width, width, cnt, as_pt64(points + base), valid);
        for (size_t i = 0; i < cnt; i++)
            if (!valid[i]) {
                *bad = base + i;
                return 0;
            }
    }
    return 1;
}

static void ifma_shared_secrets(const spn_scanner *sc, const secp256k1_pubkey *points,
                                const unsigned char (*scalar32)[32], size_t n, unsigned char (*ecdh33)[33]) {
    if (n < MIN_LANES) {
        spn_engine_secp.shared_secrets(sc, points, scalar32, n, ecdh33);
        return;
    }
    spn_ifma_shared_secrets(&sc->scan_key_glv, sc->scan_key_words, as_cpt64(points), scalar32, n, ecdh33, NULL);
}

static void ifma_spend_points(const spn_scanner *sc, const unsigned char (*t_k32)[32], size_t n,
                              secp256k1_pubkey *p_k, unsigned char (*p33)[33]) {
    if (n < MIN_LANES) {
        spn_engine_secp.spend_points(sc, t_k32, n, p_k, p33);
        return;
    }
    spn_ifma_spend_points(sc->spend.data, t_k32, n, as_pt64(p_k), p33);
}

static void ifma_label_sums(const spn_scanner *sc, const secp256k1_pubkey *p_k, size_t n,
                            unsigned char (*sums33)[33]) {
    if (n * sc->n_labels < MIN_LANES) {
        spn_engine_secp.label_sums(sc, p_k, n, sums33);
        return;
    }
    spn_ifma_label_sums(as_cpt64(p_k), n, as_cpt64(sc->label_point), sc->n_labels, sums33);
}

static void ifma_tweaks(const secp256k1_pubkey *sums, const unsigned char (*input_hash32)[32], size_t n,
                        secp256k1_pubkey *tweak, unsigned char (*tweak33)[33]) {
    static const uint64_t one[4] = {1, 0, 0, 0}; /* (1·s_i)·A_i: per-lane scalars, no scan key */
    if (n < MIN_LANES) {
        spn_engine_secp.tweaks(sums, input_hash32, n, tweak, tweak33);
        return;
    }
    spn_ifma_shared_secrets(NULL, one, as_cpt64(sums), input_hash32, n, tweak33, as_pt64(tweak));
}

const spn_engine spn_engine_ifma = {
    "ifma", ifma_parse_points, ifma_shared_secrets, ifma_spend_points, ifma_label_sums, ifma_tweaks,
};
