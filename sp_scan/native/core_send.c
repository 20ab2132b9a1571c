/* Sending (BIP352 sender), mirroring sp_scan/send.py. Private keys and every value derived from
 * them live in local buffers wiped on every path; secret scalars only go through constant-time
 * code (our own add mod n, libsecp's seckey_* / pubkey_create / ecdh). */
#include "core.h"

#include <stdlib.h>

#include "sha256.h"

int spn_seckey_sum(unsigned char out32[32], const unsigned char (*keys32)[32], const unsigned char *is_taproot,
                   size_t n_keys) {
    const secp256k1_context *ctx = spn_ctx.secret;
    unsigned char a[32] = {0}, k[32], neg[32], a33[33];
    secp256k1_pubkey point;
    int ret = 1;
    for (size_t i = 0; i < n_keys; i++) {
        memcpy(k, keys32[i], 32);
        if (!spn_secp.ec_seckey_verify(ctx, k)) {
            ret = SPN_EKEY;
            goto done;
        }
        if (is_taproot[i]) {
            /* The parity of a_i·G is public (the input's key is on chain). */
            spn_secp.ec_pubkey_create(ctx, &point, k);
            spn_ser33(ctx, a33, &point);
            unsigned char odd = (unsigned char)-(a33[0] & 1);
            memcpy(neg, k, 32);
            spn_secp.ec_seckey_negate(ctx, neg);
            for (int j = 0; j < 32; j++) k[j] = (unsigned char)((neg[j] & odd) | (k[j] & ~odd));
        }
        spn_scalar_add(a, a, k);
    }
    if (!spn_secp.ec_seckey_verify(ctx, a)) {
        ret = SPN_EKEYSUM;
        goto done;
    }
    memcpy(out32, a, 32);
done:
    spn_cleanse(a, sizeof a);
    spn_cleanse(k, sizeof k);
    spn_cleanse(neg, sizeof neg);
    spn_cleanse(&point, sizeof point);
    return ret;
}

/* out32 = input_hash·a mod n, taproot keys negated to even Y. */
static int tweaked_secret(unsigned char out32[32], const unsigned char (*outpoints36)[36], size_t n_outpoints,
                          const unsigned char (*keys32)[32], const unsigned char *is_taproot, size_t n_keys) {
    const secp256k1_context *ctx = spn_ctx.secret;
    unsigned char a[32], a33[33], input_hash[32];
    const unsigned char *smallest;
    secp256k1_pubkey point;
    spn_sha256 h;
    int ret;
    if (n_outpoints == 0 || n_keys == 0) return SPN_ESEND;
    ret = spn_seckey_sum(a, keys32, is_taproot, n_keys);
    if (ret != 1) return ret;
    smallest = outpoints36[0];
    for (size_t i = 1; i < n_outpoints; i++)
        if (memcmp(outpoints36[i], smallest, 36) < 0) smallest = outpoints36[i];
    spn_secp.ec_pubkey_create(ctx, &point, a);
    spn_ser33(ctx, a33, &point);
    spn_sha256_init_tagged(&h, SPN_TAG_INPUTS);
    spn_sha256_write(&h, smallest, 36);
    spn_sha256_write(&h, a33, 33);
    spn_sha256_finalize(&h, input_hash);
    if (!spn_secp.ec_seckey_verify(ctx, input_hash) || !spn_secp.ec_seckey_tweak_mul(ctx, a, input_hash)) {
        ret = SPN_ESEND;
        goto done;
    }
    memcpy(out32, a, 32);
done:
    spn_cleanse(a, sizeof a);
    spn_cleanse(&point, sizeof point);
    return ret;
}

int spn_send_shared_secret(unsigned char ecdh33[33], const unsigned char (*outpoints36)[36], size_t n_outpoints,
                           const unsigned char (*keys32)[32], const unsigned char *is_taproot, size_t n_keys,
                           const unsigned char scan33[33]) {
    unsigned char secret[32];
    secp256k1_pubkey scan;
    int ret = tweaked_secret(secret, outpoints36, n_outpoints, keys32, is_taproot, n_keys);
    if (ret == 1) {
        if (!spn_parse33(spn_ctx.secret, &scan, scan33) || !spn_ecdh33(spn_ctx.secret, ecdh33, &scan, secret))
            ret = SPN_EKEY;
    }
    spn_cleanse(secret, sizeof secret);
    return ret;
}

typedef struct {
    const unsigned char *scan33;
    uint32_t index;
} group_entry;

static int cmp_group(const void *a, const void *b) {
    const group_entry *x = a, *y = b;
    int c = memcmp(x->scan33, y->scan33, 33);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

int spn_create_outputs(unsigned char (*outputs32)[32], const unsigned char (*outpoints36)[36], size_t n_outpoints,
                       const unsigned char (*keys32)[32], const unsigned char *is_taproot, size_t n_keys,
                       const spn_recipient *recipients, size_t n_recipients) {
    const secp256k1_context *ctx = spn_ctx.secret;
    unsigned char secret[32], ecdh33[33], t_k[32], p33[33];
    group_entry *order;
    spn_sha256 base;
    int ret;
    if (n_recipients == 0) return SPN_ESEND;
    ret = tweaked_secret(secret, outpoints36, n_outpoints, keys32, is_taproot, n_keys);
    if (ret != 1) return ret;
    order = malloc(n_recipients * sizeof *order);
    if (order == NULL) {
        ret = SPN_ENOMEM;
        goto done;
    }
    /* Group by B_scan, keeping recipient order inside a group: k counts within the group. */
    for (size_t i = 0; i < n_recipients; i++) {
        order[i].scan33 = recipients[i].scan33;
        order[i].index = (uint32_t)i;
    }
    qsort(order, n_recipients, sizeof *order, cmp_group);
    for (size_t start = 0, end; start < n_recipients; start = end) {
        for (end = start + 1; end < n_recipients && memcmp(order[end].scan33, order[start].scan33, 33) == 0; end++) {}
        if (end - start > SPN_K_MAX) {
            ret = SPN_EKMAX;
            goto done;
        }
    }
    for (size_t start = 0, end; start < n_recipients; start = end) {
        secp256k1_pubkey scan;
        for (end = start + 1; end < n_recipients && memcmp(order[end].scan33, order[start].scan33, 33) == 0; end++) {}
        if (!spn_parse33(ctx, &scan, order[start].scan33) || !spn_ecdh33(ctx, ecdh33, &scan, secret)) {
            ret = SPN_EKEY;
            goto done;
        }
        spn_sha256_init_tagged(&base, SPN_TAG_SHARED_SECRET);
        spn_sha256_write(&base, ecdh33, 33);
        for (size_t j = start; j < end; j++) {
            uint32_t k = (uint32_t)(j - start);
            secp256k1_pubkey spend, t_g, p_k;
            const secp256k1_pubkey *pair[2] = {&spend, &t_g};
            spn_t_k(&base, k, t_k);
            if (!spn_parse33(ctx, &spend, recipients[order[j].index].spend33)) {
                ret = SPN_EKEY;
                goto done;
            }
            if (!spn_secp.ec_pubkey_create(ctx, &t_g, t_k) || !spn_secp.ec_pubkey_combine(ctx, &p_k, pair, 2)) {
                ret = SPN_ESEND;
                goto done;
            }
            spn_ser33(ctx, p33, &p_k);
            memcpy(outputs32[order[j].index], p33 + 1, 32);
        }
    }
    ret = 1;
done:
    free(order);
    spn_cleanse(secret, sizeof secret);
    spn_cleanse(ecdh33, sizeof ecdh33);
    spn_cleanse(t_k, sizeof t_k);
    spn_cleanse(&base, sizeof base);
    return ret;
}
