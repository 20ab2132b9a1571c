/* Input classification and the prevouts summary, mirroring sp_scan/extract.py and summary.py. */
#include "core.h"

#include <stdlib.h>

#include "ripemd160.h"
#include "sha256.h"

static const unsigned char NUMS_H[32] = {
    0x50, 0x92, 0x9b, 0x74, 0xc1, 0xa0, 0x49, 0x54, 0xb7, 0x8b, 0x4b, 0x60, 0x35, 0xe9, 0x7a, 0x5e,
    0x07, 0x8a, 0x5a, 0x0f, 0x28, 0xec, 0x96, 0xd5, 0x47, 0xbf, 0xee, 0x9a, 0xce, 0x80, 0x3a, 0xc0,
};

enum { OP_PUSHDATA1 = 0x4c, OP_PUSHDATA2 = 0x4d, OP_PUSHDATA4 = 0x4e, ANNEX_TAG = 0x50 };
enum { CONTROL_BASE = 33, CONTROL_NODE = 32, CONTROL_MAX_NODES = 128 };
enum { T_OTHER, T_P2PKH, T_P2SH, T_P2WPKH, T_P2TR, T_WITNESS_UNKNOWN };

static int script_type(const spn_span *sc) {
    const unsigned char *s = sc->p;
    size_t n = sc->n;
    if (n == 25 && s[0] == 0x76 && s[1] == 0xa9 && s[2] == 0x14 && s[23] == 0x88 && s[24] == 0xac) return T_P2PKH;
    if (n == 23 && s[0] == 0xa9 && s[1] == 0x14 && s[22] == 0x87) return T_P2SH;
    if (n == 22 && s[0] == 0x00 && s[1] == 0x14) return T_P2WPKH;
    if (n == 34 && s[0] == 0x51 && s[1] == 0x20) return T_P2TR;
    if (n >= 4 && n <= 42 && s[0] >= 0x52 && s[0] <= 0x60 && s[1] == n - 2) return T_WITNESS_UNKNOWN;
    return T_OTHER;
}

int spn_is_witness_unknown(const spn_span *script) { return script_type(script) == T_WITNESS_UNKNOWN; }

/* How a key is checked: parsed into *key; only its validity (without a square root: spn_valid_x); or
 * only its form (prefix and width), for a batched parse to decide later (spn_input_key). */
enum { CHECK_PARSE, CHECK_VALID, CHECK_FORM };

static int compressed_key(const spn_span *item, secp256k1_pubkey *key, unsigned char ser33[33], int check) {
    if (item->n != 33) return SPN_KEY_NONE;
    if (check == CHECK_PARSE ? !spn_parse33(spn_ctx.public, key, item->p)
                             : (item->p[0] != 0x02 && item->p[0] != 0x03) || (check == CHECK_VALID && !spn_valid_x(item->p + 1)))
        return SPN_KEY_NONE;
    memcpy(ser33, item->p, 33);
    return SPN_KEY_COMPRESSED;
}

enum { P2PKH_BATCH = 8 };

/* The first of the n 33-byte pushes whose HASH160 is key_hash20 and that is a valid point. */
static int p2pkh_match(const unsigned char *const *push33, size_t n, const unsigned char key_hash20[20],
                       secp256k1_pubkey *key, unsigned char ser33[33]) {
    unsigned char h20[P2PKH_BATCH][20];
    spn_hash160_33_many(push33, n, h20);
    for (size_t j = 0; j < n; j++) {
        if (memcmp(h20[j], key_hash20, 20) != 0) continue;
        spn_span item = {push33[j], 33};
        int found = compressed_key(&item, key, ser33, key ? CHECK_PARSE : CHECK_VALID);
        if (found != SPN_KEY_NONE) return found;
    }
    return SPN_KEY_NONE;
}

/* First 33-byte push whose HASH160 matches and that is a valid compressed point; none when any
 * push of the scriptSig is truncated (the reference parses every push first). The 33-byte pushes
 * are hashed in order until one is found: the first alone (a key-first scriptSig costs one hash),
 * then P2PKH_BATCH at a time. */
static int p2pkh(const spn_input *in, secp256k1_pubkey *key, unsigned char ser33[33]) {
    const unsigned char *s = in->script_sig.p, *key_hash = in->prevout.p + 3;
    const unsigned char *batch[P2PKH_BATCH];
    size_t i = 0, n = in->script_sig.n, n_batch = 0, batch_cap = 1;
    int found = SPN_KEY_NONE;
    while (i < n) {
        unsigned op = s[i++];
        size_t size, width;
        if (op > OP_PUSHDATA4) continue;
        if (op < OP_PUSHDATA1) {
            size = op;
        } else {
            width = op == OP_PUSHDATA1 ? 1 : op == OP_PUSHDATA2 ? 2 : 4;
            if (width > n - i) return SPN_KEY_NONE;
            size = 0;
            for (size_t b = width; b-- > 0;) size = (size << 8) | s[i + b];
            i += width;
        }
        if (size > n - i) return SPN_KEY_NONE;
        if (found == SPN_KEY_NONE && size == 33) {
            batch[n_batch++] = s + i;
            if (n_batch == batch_cap) {
                found = p2pkh_match(batch, n_batch, key_hash, key, ser33);
                n_batch = 0;
                batch_cap = P2PKH_BATCH;
            }
        }
        i += size;
    }
    return found == SPN_KEY_NONE && n_batch ? p2pkh_match(batch, n_batch, key_hash, key, ser33) : found;
}

static int p2tr(const spn_input *in, secp256k1_pubkey *key, unsigned char ser33[33], int check) {
    size_t count = in->wit_count;
    spn_span control = in->wit_last;
    if (count == 0) return SPN_KEY_NONE;
    if (count >= 2 && in->wit_last.n > 0 && in->wit_last.p[0] == ANNEX_TAG) {
        count--;
        control = in->wit_prev;
    }
    if (count >= 2) {
        if (control.n < CONTROL_BASE || (control.n - CONTROL_BASE) % CONTROL_NODE != 0 ||
            (control.n - CONTROL_BASE) / CONTROL_NODE > CONTROL_MAX_NODES)
            return SPN_KEY_NONE;
        if (memcmp(control.p + 1, NUMS_H, 32) == 0) return SPN_KEY_NONE;
    }
    if (check == CHECK_PARSE ? !spn_lift_x(spn_ctx.public, key, in->prevout.p + 2)
                             : check == CHECK_VALID && !spn_valid_x(in->prevout.p + 2))
        return SPN_KEY_NONE;
    ser33[0] = 0x02;
    memcpy(ser33 + 1, in->prevout.p + 2, 32);
    return SPN_KEY_XONLY;
}

/* The key of an input, checked as `check` says (a P2PKH key always for validity at least: which of
 * its pushes is the key depends on it). */
static int input_key(const spn_input *in, secp256k1_pubkey *key, unsigned char ser33[33], int check) {
    switch (script_type(&in->prevout)) {
    case T_P2PKH:
        return p2pkh(in, check == CHECK_PARSE ? key : NULL, ser33);
    case T_P2SH: {
        /* BIP141: the scriptSig of P2SH-P2WPKH is exactly one push of `00 14 <20>`. */
        const unsigned char *s = in->script_sig.p;
        if (in->script_sig.n != 23 || s[0] != 0x16 || s[1] != 0x00 || s[2] != 0x14 || in->wit_count == 0)
            return SPN_KEY_NONE;
        return compressed_key(&in->wit_last, key, ser33, check);
    }
    case T_P2WPKH:
        return in->wit_count ? compressed_key(&in->wit_last, key, ser33, check) : SPN_KEY_NONE;
    case T_P2TR:
        return p2tr(in, key, ser33, check);
    default:
        return SPN_KEY_NONE;
    }
}

int spn_input_pubkey(const spn_input *in, secp256k1_pubkey *key, unsigned char ser33[33]) {
    return input_key(in, key, ser33, key ? CHECK_PARSE : CHECK_VALID);
}

/* input_hash of a summary whose sum (A) is set: 1 when it is a valid scalar (0 < h < n). */
static int summary_hash(spn_summary *out) {
    spn_sha256 h;
    spn_ser33(spn_ctx.public, out->pubkey_sum33, &out->sum);
    spn_sha256_init_tagged(&h, SPN_TAG_INPUTS);
    spn_sha256_write(&h, out->outpoint_smallest36, 36);
    spn_sha256_write(&h, out->pubkey_sum33, 33);
    spn_sha256_finalize(&h, out->input_hash32);
    return spn_secp.ec_seckey_verify(spn_ctx.public, out->input_hash32) ? 1 : 0;
}

enum { STACK_KEYS = 32 };

int spn_summarize(const spn_input *ins, size_t n, spn_summary *out) {
    secp256k1_pubkey stack_keys[STACK_KEYS];
    const secp256k1_pubkey *stack_ptrs[STACK_KEYS];
    secp256k1_pubkey *keys = stack_keys;
    const secp256k1_pubkey **ptrs = stack_ptrs;
    unsigned char ser33[33];
    size_t n_keys = 0;
    int ret = 0;

    for (size_t i = 0; i < n; i++)
        if (spn_is_witness_unknown(&ins[i].prevout)) return 0;
    if (n > STACK_KEYS) {
        keys = malloc(n * sizeof *keys);
        ptrs = malloc(n * sizeof *ptrs);
        if (keys == NULL || ptrs == NULL) {
            ret = SPN_ENOMEM;
            goto done;
        }
    }
    const unsigned char *smallest = NULL;
    for (size_t i = 0; i < n; i++) {
        if (smallest == NULL || memcmp(ins[i].outpoint36, smallest, 36) < 0) smallest = ins[i].outpoint36;
        if (spn_input_pubkey(&ins[i], &keys[n_keys], ser33) != SPN_KEY_NONE) {
            ptrs[n_keys] = &keys[n_keys];
            n_keys++;
        }
    }
    /* combine sums in Jacobian coordinates, so a running sum may pass through infinity. */
    if (n_keys == 0 || !spn_secp.ec_pubkey_combine(spn_ctx.public, &out->sum, ptrs, n_keys)) goto done;
    memcpy(out->outpoint_smallest36, smallest, 36);
    ret = summary_hash(out);
done:
    if (keys != stack_keys) free(keys);
    if (ptrs != stack_ptrs) free((void *)ptrs);
    return ret;
}

int spn_summarize_many(const spn_input *const *ins, const size_t *n_ins, size_t n, spn_summary *out, unsigned char *ok) {
    size_t total = 0, k = 0;
    for (size_t i = 0; i < n; i++) total += n_ins[i];
    unsigned char(*keys)[33] = malloc((total ? total : 1) * sizeof *keys), *found = malloc(n ? n : 1);
    size_t *first = malloc((n + 1) * sizeof *first);
    secp256k1_pubkey *sums = malloc((n ? n : 1) * sizeof *sums);
    int ret = keys && found && first && sums ? 1 : SPN_ENOMEM;
    for (size_t i = 0; ret == 1 && i < n; i++) {
        const spn_input *in = ins[i];
        const unsigned char *smallest = NULL;
        int unknown = 0;
        first[i] = k;
        for (size_t j = 0; j < n_ins[i]; j++) unknown |= spn_is_witness_unknown(&in[j].prevout);
        for (size_t j = 0; j < n_ins[i] && !unknown; j++) {
            if (smallest == NULL || memcmp(in[j].outpoint36, smallest, 36) < 0) smallest = in[j].outpoint36;
            if (input_key(&in[j], NULL, keys[k], CHECK_FORM) != SPN_KEY_NONE) k++;
        }
        if (smallest) memcpy(out[i].outpoint_smallest36, smallest, 36);
    }
    if (ret == 1) {
        first[n] = k;
        if (n && !spn_engine_active->key_sums((const unsigned char(*)[33])keys, first, n, sums, found)) ret = SPN_ENOMEM;
        for (size_t i = 0; ret == 1 && i < n; i++) {
            ok[i] = 0;
            if (!found[i]) continue; /* no key that is a point, or they sum to infinity */
            out[i].sum = sums[i];
            ok[i] = (unsigned char)summary_hash(&out[i]);
        }
    }
    free(keys);
    free(found);
    free(first);
    free(sums);
    return ret;
}

int spn_summary_tweak(const spn_summary *s, unsigned char tweak33[33]) {
    secp256k1_pubkey t = s->sum;
    if (!spn_secp.ec_pubkey_tweak_mul(spn_ctx.public, &t, s->input_hash32)) return 0;
    spn_ser33(spn_ctx.public, tweak33, &t);
    return 1;
}
