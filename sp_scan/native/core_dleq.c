/* BIP374 DLEQ proof generation, mirroring sp_scan/dleq.py. The secret a and the nonce k only go
 * through constant-time code: libsecp's ecdh (the point a·P, ct in the scalar), seckey_verify and
 * seckey_tweak_mul, and our own add/reduce mod n. Every buffer that held them is wiped on every
 * path. Verification works on public data only and stays in Python. */
#include "core.h"

#include "sha256.h"

static const unsigned char G33[33] = {
    0x02, 0x79, 0xBE, 0x66, 0x7E, 0xF9, 0xDC, 0xBB, 0xAC, 0x55, 0xA0, 0x62, 0x95, 0xCE, 0x87, 0x0B, 0x07,
    0x02, 0x9B, 0xFC, 0xDB, 0x2D, 0xCE, 0x28, 0xD9, 0x59, 0xF2, 0x81, 0x5B, 0x16, 0xF8, 0x17, 0x98};

/* Start a BIP340 tagged hash for one of the three BIP374 tags (computed: they are rare). */
static void tagged_init(spn_sha256 *h, const char *tag) {
    unsigned char tag_hash[32];
    spn_sha256_init(h);
    spn_sha256_write(h, (const unsigned char *)tag, strlen(tag));
    spn_sha256_finalize(h, tag_hash);
    spn_sha256_init(h);
    spn_sha256_write(h, tag_hash, 32);
    spn_sha256_write(h, tag_hash, 32);
}

int spn_dleq_prove(unsigned char proof64[64], unsigned char a_pub33[33], unsigned char c33[33],
                   const unsigned char a32[32], const unsigned char b33[33], const unsigned char g33[33],
                   const unsigned char r32[32], const unsigned char *m32) {
    const secp256k1_context *ctx = spn_ctx.secret;
    secp256k1_pubkey b, g;
    unsigned char t[32], rand[32], k[32], r1[33], r2[33], e[32], e_mod[32], s[32];
    spn_sha256 h;
    int ret = 0;
    if (!spn_parse33(ctx, &b, b33) || !spn_parse33(ctx, &g, g33)) return SPN_EKEY;
    if (!spn_secp.ec_seckey_verify(ctx, a32)) return 0;
    if (!spn_ecdh33(ctx, a_pub33, &g, a32) || !spn_ecdh33(ctx, c33, &b, a32)) goto done;
    /* t = bytes(a) xor hash_aux(r); rand = hash_nonce(t || A || C || m); k = rand mod n. */
    tagged_init(&h, "BIP0374/aux");
    spn_sha256_write(&h, r32, 32);
    spn_sha256_finalize(&h, t);
    for (int i = 0; i < 32; i++) t[i] ^= a32[i];
    tagged_init(&h, "BIP0374/nonce");
    spn_sha256_write(&h, t, 32);
    spn_sha256_write(&h, a_pub33, 33);
    spn_sha256_write(&h, c33, 33);
    if (m32 != NULL) spn_sha256_write(&h, m32, 32);
    spn_sha256_finalize(&h, rand);
    spn_scalar_reduce(k, rand);
    if (!spn_secp.ec_seckey_verify(ctx, k)) goto done; /* k = 0: the BIP fails */
    if (!spn_ecdh33(ctx, r1, &g, k) || !spn_ecdh33(ctx, r2, &b, k)) goto done;
    /* e = hash_challenge(A || B || C || G || R1 || R2 || m): public. */
    tagged_init(&h, "BIP0374/challenge");
    spn_sha256_write(&h, a_pub33, 33);
    spn_sha256_write(&h, b33, 33);
    spn_sha256_write(&h, c33, 33);
    spn_sha256_write(&h, g33, 33);
    spn_sha256_write(&h, r1, 33);
    spn_sha256_write(&h, r2, 33);
    if (m32 != NULL) spn_sha256_write(&h, m32, 32);
    spn_sha256_finalize(&h, e);
    /* s = (k + e·a) mod n; e mod n = 0 (public) leaves s = k. */
    spn_scalar_reduce(e_mod, e);
    memcpy(s, a32, 32);
    if (spn_secp.ec_seckey_verify(ctx, e_mod)) {
        if (!spn_secp.ec_seckey_tweak_mul(ctx, s, e_mod)) goto done;
    } else {
        memset(s, 0, 32);
    }
    spn_scalar_add(s, s, k);
    memcpy(proof64, e, 32);
    memcpy(proof64 + 32, s, 32);
    ret = 1;
done:
    spn_cleanse(t, sizeof t);
    spn_cleanse(rand, sizeof rand);
    spn_cleanse(k, sizeof k);
    spn_cleanse(s, sizeof s);
    spn_cleanse(&h, sizeof h);
    return ret;
}

int spn_ecdh_share_prove(unsigned char share33[33], unsigned char a_pub33[33], unsigned char proof64[64],
                         const unsigned char (*keys32)[32], const unsigned char *is_taproot, size_t n_keys,
                         const unsigned char scan33[33], const unsigned char r32[32]) {
    unsigned char a[32];
    int ret = spn_seckey_sum(a, keys32, is_taproot, n_keys);
    if (ret == 1) ret = spn_dleq_prove(proof64, a_pub33, share33, a, scan33, G33, r32, NULL);
    spn_cleanse(a, sizeof a);
    return ret;
}
