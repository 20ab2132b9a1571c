/* The EC engine on libsecp256k1's public API (through coincurve's library): one call per point,
 * constant-time multiplications for b_scan·T and t_k·G, as a scan of one tx always did. */
#include "core.h"

#include <stdlib.h>

const spn_engine *spn_engine_active = &spn_engine_secp;

static int secp_parse_points(const unsigned char *in, size_t width, size_t n, secp256k1_pubkey *points, size_t *bad) {
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = in + i * width;
        int ok;
        if (width == 64) {
            unsigned char ser65[65]; /* 04 ‖ x ‖ y: libsecp checks x, y < p and the curve equation */
            ser65[0] = 0x04;
            memcpy(ser65 + 1, p, 64);
            ok = spn_secp.ec_pubkey_parse(spn_ctx.public, &points[i], ser65, 65);
        } else {
            ok = width == 33 && spn_parse33(spn_ctx.public, &points[i], p);
        }
        if (!ok) {
            *bad = i;
            return 0;
        }
    }
    return 1;
}

static void secp_shared_secrets(const spn_scanner *sc, const secp256k1_pubkey *points,
                                const unsigned char (*scalar32)[32], size_t n, unsigned char (*ecdh33)[33]) {
    unsigned char key32[32];
    for (size_t i = 0; i < n; i++) {
        memcpy(key32, sc->scan_key32, 32);
        /* (b_scan·input_hash)·A: one constant-time point multiplication instead of two. */
        int ok = scalar32 == NULL || spn_secp.ec_seckey_tweak_mul(spn_ctx.public, key32, scalar32[i]);
        if (!ok || !spn_ecdh33(spn_ctx.public, ecdh33[i], &points[i], key32)) ecdh33[i][0] = 0;
    }
    spn_cleanse(key32, sizeof key32);
}

static void secp_spend_points(const spn_scanner *sc, const unsigned char (*t_k32)[32], size_t n,
                              secp256k1_pubkey *p_k, unsigned char (*p33)[33]) {
    for (size_t i = 0; i < n; i++) {
        secp256k1_pubkey t_g;
        const secp256k1_pubkey *pair[2] = {&sc->spend, &t_g};
        if (spn_secp.ec_pubkey_create(spn_ctx.public, &t_g, t_k32[i]) &&
            spn_secp.ec_pubkey_combine(spn_ctx.public, &p_k[i], pair, 2))
            spn_ser33(spn_ctx.public, p33[i], &p_k[i]);
        else
            p33[i][0] = 0;
        spn_cleanse(&t_g, sizeof t_g);
    }
}

static void secp_label_sums(const spn_scanner *sc, const secp256k1_pubkey *p_k, size_t n,
                            unsigned char (*sums33)[33]) {
    for (size_t i = 0; i < n; i++)
        for (size_t m = 0; m < sc->n_labels; m++) {
            secp256k1_pubkey q;
            const secp256k1_pubkey *pair[2] = {&p_k[i], &sc->label_point[m]};
            unsigned char *out33 = sums33[i * sc->n_labels + m];
            if (spn_secp.ec_pubkey_combine(spn_ctx.public, &q, pair, 2)) spn_ser33(spn_ctx.public, out33, &q);
            else out33[0] = 0;
        }
}

static void secp_tweaks(const secp256k1_pubkey *sums, const unsigned char (*input_hash32)[32], size_t n,
                        secp256k1_pubkey *tweak, unsigned char (*tweak33)[33]) {
    for (size_t i = 0; i < n; i++) {
        tweak[i] = sums[i];
        if (spn_secp.ec_pubkey_tweak_mul(spn_ctx.public, &tweak[i], input_hash32[i])) spn_ser33(spn_ctx.public, tweak33[i], &tweak[i]);
        else tweak33[i][0] = 0;
    }
}

static int secp_key_sums(const unsigned char (*keys33)[33], const size_t *first, size_t n, secp256k1_pubkey *sums,
                         unsigned char *found) {
    enum { STACK = 16 };
    secp256k1_pubkey stack_keys[STACK], *keys = stack_keys;
    const secp256k1_pubkey *stack_ptrs[STACK], **ptrs = stack_ptrs;
    size_t most = 0;
    for (size_t i = 0; i < n; i++)
        if (first[i + 1] - first[i] > most) most = first[i + 1] - first[i];
    if (most > STACK) {
        keys = malloc(most * sizeof *keys);
        ptrs = malloc(most * sizeof *ptrs);
    }
    int ok = keys != NULL && ptrs != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        size_t m = 0;
        for (size_t j = first[i]; j < first[i + 1]; j++)
            if (spn_parse33(spn_ctx.public, &keys[m], keys33[j])) {
                ptrs[m] = &keys[m];
                m++;
            }
        /* combine sums in Jacobian coordinates, so a running sum may pass through infinity. */
        found[i] = (unsigned char)(m > 0 && spn_secp.ec_pubkey_combine(spn_ctx.public, &sums[i], ptrs, m));
    }
    if (keys != stack_keys) free(keys);
    if (ptrs != stack_ptrs) free((void *)ptrs);
    return ok;
}

const spn_engine spn_engine_secp = {
    "libsecp256k1", secp_parse_points, secp_shared_secrets, secp_spend_points, secp_label_sums, secp_tweaks,
    secp_key_sums,
};
