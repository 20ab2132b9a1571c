/* Bitcoin Core's block files: a block checked against its header, the files' XOR obfuscation, and
 * Core's undo data (a CBlockUndo as rev*.dat stores it) turned into the REST spent-outputs form,
 * mirroring wire.spent_from_undo: per non-coinbase tx a compact-size coin count, per coin Core's
 * VARINT height code (a dummy VARINT follows when the height is above 0), the compressed amount
 * (compressor.cpp's DecompressAmount) and the compressed script (P2PKH 0, P2SH 1, P2PK 2-5, else
 * length + 6; a script over MAX_SCRIPT_SIZE reads as OP_RETURN, an uncompressed key off the curve as
 * an empty script, as Core leaves them). Needs no Python: callers release the GIL around it. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

#include "sha256.h"

#define MAX_MONEY (21000000ULL * 100000000ULL)
enum { SPECIAL_SCRIPTS = 6, MAX_SCRIPT_SIZE = 10000 };

typedef struct {
    const unsigned char *p, *end;
} ureader;

typedef struct {
    unsigned char *p;
    size_t n, cap;
} ubuf;

static int room(ubuf *b, size_t more) {
    if (more <= b->cap - b->n) return 1;
    size_t cap = b->cap * 2 > b->n + more ? b->cap * 2 : b->n + more;
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL) return 0;
    b->p = p;
    b->cap = cap;
    return 1;
}

static void put_compact(ubuf *b, uint64_t v) {
    unsigned char *p = b->p + b->n;
    size_t width = v < 0xfd ? 0 : v <= 0xffff ? 2 : v <= 0xffffffffULL ? 4 : 8;
    if (width == 0) {
        p[0] = (unsigned char)v;
        b->n += 1;
        return;
    }
    p[0] = width == 2 ? 0xfd : width == 4 ? 0xfe : 0xff;
    for (size_t i = 0; i < width; i++) p[1 + i] = (unsigned char)(v >> (8 * i));
    b->n += 1 + width;
}

static int varint(ureader *r, uint64_t limit, uint64_t *out) {
    uint64_t n = 0;
    for (;;) {
        if (r->p == r->end) return 0;
        unsigned char byte = *r->p++;
        if (n > limit >> 7) return 0;
        n = n << 7 | (byte & 0x7f);
        if (!(byte & 0x80)) {
            *out = n;
            return 1;
        }
        if (n == limit) return 0;
        n++;
    }
}

/* A canonical compact-size count of items of at least one byte that fit in what is left. */
static int count(ureader *r, uint64_t *n) {
    if (r->p == r->end) return 0;
    unsigned char first = *r->p++;
    if (first < 0xfd) {
        *n = first;
    } else {
        size_t width = first == 0xfd ? 2 : first == 0xfe ? 4 : 8;
        uint64_t floor = first == 0xfd ? 0xfd : first == 0xfe ? 0x10000 : 0x100000000ULL;
        if ((size_t)(r->end - r->p) < width) return 0;
        uint64_t v = 0;
        for (size_t i = width; i-- > 0;) v = v << 8 | r->p[i];
        r->p += width;
        if (v < floor) return 0;
        *n = v;
    }
    return *n <= (uint64_t)(r->end - r->p);
}

static uint64_t decompress_amount(uint64_t x) {
    if (x == 0) return 0;
    x--;
    unsigned e = (unsigned)(x % 10);
    x /= 10;
    uint64_t n = e < 9 ? x / 9 * 10 + x % 9 + 1 : x + 1;
    while (e-- > 0) {
        if (n > MAX_MONEY) return MAX_MONEY + 1; /* out of range either way; stops the overflow */
        n *= 10;
    }
    return n;
}

/* Append the CTxOut of one compressed output; 1, 0 (malformed) or SPN_ENOMEM. */
static int put_txout(ureader *r, ubuf *b, uint64_t amount) {
    uint64_t size;
    if (!varint(r, UINT32_MAX, &size)) return 0;
    size_t avail = (size_t)(r->end - r->p);
    if (!room(b, 8 + 9 + 67)) return SPN_ENOMEM;
    for (int i = 0; i < 8; i++) b->p[b->n + i] = (unsigned char)(amount >> (8 * i));
    b->n += 8;
    unsigned char *o = b->p + b->n;
    if (size < 2) {
        if (avail < 20) return 0;
        if (size == 0) {
            memcpy(o, "\x19\x76\xa9\x14", 4);
            memcpy(o + 4, r->p, 20);
            memcpy(o + 24, "\x88\xac", 2);
            b->n += 26;
        } else {
            memcpy(o, "\x17\xa9\x14", 3);
            memcpy(o + 3, r->p, 20);
            o[23] = 0x87;
            b->n += 24;
        }
        r->p += 20;
        return 1;
    }
    if (size < SPECIAL_SCRIPTS) {
        if (avail < 32) return 0;
        unsigned char in33[33], out65[65];
        in33[0] = (unsigned char)(size < 4 ? size : size - 2);
        memcpy(in33 + 1, r->p, 32);
        r->p += 32;
        if (size < 4) {
            o[0] = 35, o[1] = 33;
            memcpy(o + 2, in33, 33);
            o[35] = 0xac;
            b->n += 36;
            return 1;
        }
        secp256k1_pubkey key;
        size_t len = sizeof out65;
        if (!spn_secp.ec_pubkey_parse(spn_ctx.public, &key, in33, 33)) {
            o[0] = 0; /* not on the curve: Core leaves the script empty */
            b->n += 1;
            return 1;
        }
        spn_secp.ec_pubkey_serialize(spn_ctx.public, out65, &len, &key, SPN_SECP_EC_UNCOMPRESSED);
        o[0] = 67, o[1] = 65;
        memcpy(o + 2, out65, 65);
        o[67] = 0xac;
        b->n += 68;
        return 1;
    }
    size -= SPECIAL_SCRIPTS;
    if (size > avail) return 0;
    if (size > MAX_SCRIPT_SIZE) {
        o[0] = 1, o[1] = 0x6a;
        b->n += 2;
    } else {
        if (!room(b, 9 + size)) return SPN_ENOMEM;
        put_compact(b, size);
        memcpy(b->p + b->n, r->p, size);
        b->n += size;
    }
    r->p += size;
    return 1;
}

int spn_spent_from_undo(const unsigned char *undo, size_t undo_len, unsigned char **out, size_t *out_len) {
    ureader r = {undo, undo + undo_len};
    ubuf b = {NULL, 0, 0};
    uint64_t n_tx, n_in, code, dummy, amount;
    int ok = 0;
    *out = NULL;
    if (!room(&b, undo_len * 3 + 32)) return SPN_ENOMEM;
    if (!count(&r, &n_tx)) goto done;
    put_compact(&b, n_tx + 1);
    b.p[b.n++] = 0; /* the coinbase spends nothing */
    for (uint64_t t = 0; t < n_tx; t++) {
        if (!count(&r, &n_in) || !room(&b, 9)) goto done;
        put_compact(&b, n_in);
        for (uint64_t i = 0; i < n_in; i++) {
            if (!varint(&r, UINT32_MAX, &code)) goto done;
            if (code >> 1 && !varint(&r, UINT32_MAX, &dummy)) goto done;
            if (!varint(&r, UINT64_MAX, &amount)) goto done;
            amount = decompress_amount(amount);
            if (amount > MAX_MONEY) goto done;
            int res = put_txout(&r, &b, amount);
            if (res != 1) {
                ok = res;
                goto done;
            }
        }
    }
    ok = r.p == r.end;
done:
    if (ok != 1) {
        free(b.p);
        return ok == SPN_ENOMEM ? SPN_ENOMEM : SPN_EUNDO;
    }
    *out = b.p;
    *out_len = b.n;
    return 1;
}

void spn_unxor(unsigned char *data, size_t n, const unsigned char key8[8], uint64_t offset) {
    unsigned char turned[8];
    for (int i = 0; i < 8; i++) turned[i] = key8[(offset + (uint64_t)i) % 8];
    size_t i = 0;
    uint64_t k, w;
    memcpy(&k, turned, 8);
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, data + i, 8);
        w ^= k;
        memcpy(data + i, &w, 8);
    }
    for (; i < n; i++) data[i] ^= turned[i % 8];
}

/* ---- a block against its header ---- */

static void sha256d(const unsigned char *a, size_t na, const unsigned char *b, size_t nb, const unsigned char *c, size_t nc,
                    unsigned char out32[32]) {
    spn_sha256 h;
    unsigned char once[32];
    spn_sha256_init(&h);
    spn_sha256_write(&h, a, na);
    spn_sha256_write(&h, b, nb);
    spn_sha256_write(&h, c, nc);
    spn_sha256_finalize(&h, once);
    spn_sha256_init(&h);
    spn_sha256_write(&h, once, 32);
    spn_sha256_finalize(&h, out32);
}

/* Core's ComputeMerkleRoot over n hashes (n >= 1), in place. */
static void merkle_root(unsigned char *hashes32, size_t n, unsigned char out32[32]) {
    while (n > 1) {
        if (n & 1) memcpy(hashes32 + 32 * n, hashes32 + 32 * (n - 1), 32), n++;
        for (size_t i = 0; i < n / 2; i++) sha256d(hashes32 + 64 * i, 64, NULL, 0, NULL, 0, hashes32 + 32 * i);
        n /= 2;
    }
    memcpy(out32, hashes32, 32);
}

static int skip(ureader *r, size_t n) {
    if (n > (size_t)(r->end - r->p)) return 0;
    r->p += n;
    return 1;
}

static int skip_bytes(ureader *r, const unsigned char **p, size_t *n) {
    uint64_t v;
    if (!count(r, &v)) return 0;
    *p = r->p, *n = (size_t)v;
    return skip(r, (size_t)v);
}

int spn_block_commits(const unsigned char *block, size_t len) {
    static const unsigned char tag[6] = {0x6a, 0x24, 0xaa, 0x21, 0xa9, 0xed};
    ureader r = {block, block + len};
    uint64_t n_tx, n_in, n_out, n_items;
    const unsigned char *commitment = NULL, *reserved = NULL, *p;
    size_t n, reserved_items = 0;
    int witness = 0, ok = 0;
    if (!skip(&r, 80) || !count(&r, &n_tx) || n_tx == 0) return 0;
    unsigned char *txids = malloc(32 * (size_t)(n_tx + 1)), *wtxids = malloc(32 * (size_t)(n_tx + 1));
    if (txids == NULL || wtxids == NULL) {
        free(txids), free(wtxids);
        return SPN_ENOMEM;
    }
    for (uint64_t t = 0; t < n_tx; t++) {
        const unsigned char *start = r.p, *body, *body_end;
        int segwit = 0;
        if (!skip(&r, 4)) goto done;
        if (r.end - r.p >= 2 && r.p[0] == 0 && r.p[1] == 1) segwit = 1, r.p += 2;
        body = r.p;
        if (!count(&r, &n_in)) goto done;
        for (uint64_t i = 0; i < n_in; i++)
            if (!skip(&r, 36) || !skip_bytes(&r, &p, &n) || !skip(&r, 4)) goto done;
        if (!count(&r, &n_out)) goto done;
        for (uint64_t o = 0; o < n_out; o++) {
            if (!skip(&r, 8) || !skip_bytes(&r, &p, &n)) goto done;
            if (t == 0 && n >= 38 && memcmp(p, tag, 6) == 0) commitment = p + 6;
        }
        body_end = r.p;
        for (uint64_t i = 0; segwit && i < n_in; i++) {
            if (!count(&r, &n_items)) goto done;
            witness |= n_items != 0;
            if (t == 0) reserved_items = (size_t)n_items;
            for (uint64_t j = 0; j < n_items; j++) {
                if (!skip_bytes(&r, &p, &n)) goto done;
                if (t == 0 && j == 0) reserved = n == 32 ? p : NULL;
            }
        }
        if (!skip(&r, 4)) goto done;
        sha256d(start, 4, body, (size_t)(body_end - body), r.p - 4, 4, txids + 32 * t);
        if (segwit)
            sha256d(start, (size_t)(r.p - start), NULL, 0, NULL, 0, wtxids + 32 * t);
        else
            memcpy(wtxids + 32 * t, txids + 32 * t, 32);
    }
    if (r.p != r.end) goto done;
    unsigned char root[32];
    merkle_root(txids, (size_t)n_tx, root);
    if (memcmp(root, block + 36, 32) != 0) goto done;
    if (commitment == NULL) {
        ok = !witness;
        goto done;
    }
    if (reserved == NULL || reserved_items != 1) goto done;
    memset(wtxids, 0, 32); /* the coinbase's wtxid */
    merkle_root(wtxids, (size_t)n_tx, root);
    sha256d(root, 32, reserved, 32, NULL, 0, root);
    ok = memcmp(root, commitment, 32) == 0;
done:
    free(txids), free(wtxids);
    return ok;
}
