/* The block hot loop: parse a raw segwit block and Core's REST spent-outputs data, then summarize
 * (tweaks) or scan every transaction, mirroring sp_scan/block.py. Needs no Python: callers
 * release the GIL around it.
 *
 * Parsing rules (as block.py): canonical compact sizes; a count of items that cannot fit in the
 * remaining bytes (min sizes: tx 10, txin 41, txout 9, witness item 1) is refused; amounts in
 * [0, MAX_MONEY]; segwit flag must be 1, then at least one input and one non-empty witness; no
 * trailing bytes; at least one transaction and the first a coinbase. The block is parsed first
 * (SPN_EBLOCK), then the spent data (SPN_ESPENT), then their shapes compared (SPN_ESHAPE). */
#include "core.h"

#include <stdlib.h>

#include "sha256.h"

#define MAX_MONEY (21000000LL * 100000000LL)
enum { HEADER = 80, MIN_TX = 10, MIN_TXIN = 41, MIN_TXOUT = 9 };

typedef struct {
    const unsigned char *p, *end;
} reader;

typedef struct {
    int64_t value;
    spn_span script;
} txout_t;

typedef struct {
    const unsigned char *version, *body, *locktime;
    size_t body_len;
    size_t first_in, n_in, first_out, n_out;
} tx_t;

typedef struct {
    tx_t *txs;
    size_t n_tx;
    spn_input *ins;
    size_t n_ins, cap_ins;
    txout_t *outs;
    size_t n_outs, cap_outs;
    /* spent data: per tx an entry count and the index of its first txout in prevouts */
    size_t *spent_count, *spent_first, n_spent;
    txout_t *prevouts;
    size_t n_prevouts, cap_prevouts;
} block_t;

static int take(reader *r, size_t n, const unsigned char **out) {
    if (n > (size_t)(r->end - r->p)) return 0;
    *out = r->p;
    r->p += n;
    return 1;
}

static int compact(reader *r, uint64_t *v) {
    const unsigned char *b;
    if (!take(r, 1, &b)) return 0;
    if (b[0] < 0xfd) {
        *v = b[0];
        return 1;
    }
    size_t width = b[0] == 0xfd ? 2 : b[0] == 0xfe ? 4 : 8;
    uint64_t floor = b[0] == 0xfd ? 0xfd : b[0] == 0xfe ? 0x10000 : 0x100000000ull;
    if (!take(r, width, &b)) return 0;
    *v = 0;
    for (size_t i = width; i-- > 0;) *v = (*v << 8) | b[i];
    return *v >= floor;
}

static int count(reader *r, size_t min_size, size_t *n) {
    uint64_t v;
    if (!compact(r, &v) || v > (uint64_t)(r->end - r->p) / min_size) return 0;
    *n = (size_t)v;
    return 1;
}

static int var_bytes(reader *r, spn_span *s) {
    uint64_t v;
    if (!compact(r, &v) || v > (uint64_t)(r->end - r->p)) return 0;
    s->n = (size_t)v;
    return take(r, s->n, &s->p);
}

static size_t next_cap(size_t cap, size_t need) {
    size_t cap2 = cap ? cap : 64;
    while (cap2 < need) cap2 *= 2;
    return cap2;
}

static int grow(void **arr, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 1;
    size_t cap2 = next_cap(*cap, need);
    void *p = realloc(*arr, cap2 * size);
    if (p == NULL) return 0;
    *arr = p;
    *cap = cap2;
    return 1;
}

static int txout(reader *r, txout_t *o) {
    const unsigned char *b;
    if (!take(r, 8, &b)) return 0;
    uint64_t v = 0;
    for (int i = 8; i-- > 0;) v = (v << 8) | b[i];
    o->value = (int64_t)v;
    if (o->value < 0 || o->value > MAX_MONEY) return 0;
    return var_bytes(r, &o->script);
}

/* 1 ok, 0 malformed, SPN_ENOMEM */
static int parse_tx(reader *r, block_t *b, tx_t *tx) {
    const unsigned char *flag, *b4;
    size_t n_in, n_out;
    int segwit;
    if (!take(r, 4, &tx->version)) return 0;
    tx->body = r->p;
    if (!count(r, MIN_TXIN, &n_in)) return 0;
    segwit = n_in == 0;
    if (segwit) {
        if (!take(r, 1, &flag) || flag[0] != 1) return 0;
        tx->body = r->p;
        if (!count(r, MIN_TXIN, &n_in) || n_in == 0) return 0;
    }
    if (!grow((void **)&b->ins, &b->cap_ins, b->n_ins + n_in, sizeof *b->ins)) return SPN_ENOMEM;
    tx->first_in = b->n_ins;
    tx->n_in = n_in;
    for (size_t i = 0; i < n_in; i++) {
        spn_input *in = &b->ins[b->n_ins++];
        memset(in, 0, sizeof *in);
        if (!take(r, 36, &b4)) return 0;
        memcpy(in->outpoint36, b4, 36);
        if (!var_bytes(r, &in->script_sig) || !take(r, 4, &b4)) return 0;
    }
    if (!count(r, MIN_TXOUT, &n_out)) return 0;
    if (!grow((void **)&b->outs, &b->cap_outs, b->n_outs + n_out, sizeof *b->outs)) return SPN_ENOMEM;
    tx->first_out = b->n_outs;
    tx->n_out = n_out;
    for (size_t i = 0; i < n_out; i++)
        if (!txout(r, &b->outs[b->n_outs++])) return 0;
    tx->body_len = (size_t)(r->p - tx->body);
    if (segwit) {
        int any = 0;
        for (size_t i = 0; i < n_in; i++) {
            spn_input *in = &b->ins[tx->first_in + i];
            spn_span item;
            if (!count(r, 1, &in->wit_count)) return 0;
            for (size_t j = 0; j < in->wit_count; j++) {
                if (!var_bytes(r, &item)) return 0;
                in->wit_prev = in->wit_last;
                in->wit_last = item;
            }
            any |= in->wit_count != 0;
        }
        if (!any) return 0; /* superfluous witness record */
    }
    return take(r, 4, &tx->locktime);
}

/* The coinbase's outpoint: 32 zero bytes, then vout 0xffffffff. */
static int is_null_outpoint(const unsigned char op36[36]) {
    unsigned char acc = 0;
    for (int i = 0; i < 32; i++) acc |= op36[i];
    return acc == 0 && op36[32] == 0xff && op36[33] == 0xff && op36[34] == 0xff && op36[35] == 0xff;
}

static int parse_block(block_t *b, const unsigned char *data, size_t len) {
    reader r = {data, data + len};
    const unsigned char *header;
    if (!take(&r, HEADER, &header) || !count(&r, MIN_TX, &b->n_tx)) return SPN_EBLOCK;
    b->txs = calloc(b->n_tx ? b->n_tx : 1, sizeof *b->txs);
    if (b->txs == NULL) return SPN_ENOMEM;
    for (size_t i = 0; i < b->n_tx; i++) {
        int ret = parse_tx(&r, b, &b->txs[i]);
        if (ret != 1) return ret ? ret : SPN_EBLOCK;
    }
    if (r.p != r.end || b->n_tx == 0) return SPN_EBLOCK;
    if (b->txs[0].n_in != 1 || !is_null_outpoint(b->ins[0].outpoint36)) return SPN_EBLOCK;
    return 1;
}

static int parse_spent(block_t *b, const unsigned char *data, size_t len) {
    reader r = {data, data + len};
    if (!count(&r, 1, &b->n_spent)) return SPN_ESPENT;
    b->spent_count = malloc((b->n_spent ? b->n_spent : 1) * sizeof *b->spent_count);
    b->spent_first = malloc((b->n_spent ? b->n_spent : 1) * sizeof *b->spent_first);
    if (!b->spent_count || !b->spent_first) return SPN_ENOMEM;
    for (size_t i = 0; i < b->n_spent; i++) {
        size_t n;
        if (!count(&r, MIN_TXOUT, &n)) return SPN_ESPENT;
        if (!grow((void **)&b->prevouts, &b->cap_prevouts, b->n_prevouts + n, sizeof *b->prevouts)) return SPN_ENOMEM;
        b->spent_count[i] = n;
        b->spent_first[i] = b->n_prevouts;
        for (size_t j = 0; j < n; j++)
            if (!txout(&r, &b->prevouts[b->n_prevouts++])) return SPN_ESPENT;
    }
    return r.p == r.end ? 1 : SPN_ESPENT;
}

static int join(block_t *b) {
    if (b->n_spent != b->n_tx || b->spent_count[0] != 0) return SPN_ESHAPE;
    for (size_t i = 1; i < b->n_tx; i++) {
        const tx_t *tx = &b->txs[i];
        if (b->spent_count[i] != tx->n_in) return SPN_ESHAPE;
        for (size_t j = 0; j < tx->n_in; j++) b->ins[tx->first_in + j].prevout = b->prevouts[b->spent_first[i] + j].script;
    }
    return 1;
}

static void block_free(block_t *b) {
    free(b->txs);
    free(b->ins);
    free(b->outs);
    free(b->spent_count);
    free(b->spent_first);
    free(b->prevouts);
}

static int load(block_t *b, const unsigned char *block, size_t block_len, const unsigned char *spent,
                size_t spent_len) {
    int ret;
    memset(b, 0, sizeof *b);
    if ((ret = parse_block(b, block, block_len)) != 1) return ret;
    if ((ret = parse_spent(b, spent, spent_len)) != 1) return ret;
    return join(b);
}

static void txid(const tx_t *tx, unsigned char out32[32]) {
    spn_sha256 h;
    unsigned char first[32];
    spn_sha256_init(&h);
    spn_sha256_write(&h, tx->version, 4);
    spn_sha256_write(&h, tx->body, tx->body_len);
    spn_sha256_write(&h, tx->locktime, 4);
    spn_sha256_finalize(&h, first);
    spn_sha256_init(&h);
    spn_sha256_write(&h, first, 32);
    spn_sha256_finalize(&h, out32);
}

static int is_taproot_script(const spn_span *s) {
    return s->n == 34 && s->p[0] == 0x51 && s->p[1] == 0x20;
}

static int is_taproot(const txout_t *o) { return is_taproot_script(&o->script); }

/* Summaries of every tx of the block with a taproot output (the coinbase aside), their keys parsed and
 * summed in one batch: cand[k] is the block index of candidate k, sum[k] its summary when ok[k]. The
 * three arrays are malloc'd (freed by the caller, also on failure). Returns the count or SPN_ENOMEM. */
static long summarize_block(const block_t *b, size_t **cand, spn_summary **sum, unsigned char **ok) {
    size_t n = 0, txs = b->n_tx ? b->n_tx : 1;
    const spn_input **ins = malloc(txs * sizeof *ins);
    size_t *n_ins = malloc(txs * sizeof *n_ins);
    *cand = malloc(txs * sizeof **cand);
    *sum = malloc(txs * sizeof **sum);
    *ok = malloc(txs);
    long ret = ins && n_ins && *cand && *sum && *ok ? 1 : SPN_ENOMEM;
    for (size_t i = 1; ret == 1 && i < b->n_tx; i++) {
        const tx_t *tx = &b->txs[i];
        int taproot = 0;
        for (size_t j = 0; j < tx->n_out && !taproot; j++) taproot = is_taproot(&b->outs[tx->first_out + j]);
        if (!taproot) continue;
        ins[n] = &b->ins[tx->first_in];
        n_ins[n] = tx->n_in;
        (*cand)[n++] = i;
    }
    if (ret == 1) ret = spn_summarize_many(ins, n_ins, n, *sum, *ok);
    free(ins);
    free(n_ins);
    return ret == 1 ? (long)n : ret;
}

long spn_block_tweaks(const unsigned char *block, size_t block_len, const unsigned char *spent, size_t spent_len,
                      spn_tx_tweak **out) {
    block_t b;
    size_t n = 0, *cand = NULL;
    spn_summary *sum = NULL;
    secp256k1_pubkey *sums = NULL, *points = NULL;
    unsigned char(*hashes)[32] = NULL, (*tweaks)[33] = NULL, *ok = NULL;
    long n_cand = 0, ret = load(&b, block, block_len, spent, spent_len);
    *out = NULL;
    /* Summarize every eligible tx in one batch, then all tweaks input_hash·A in one engine call. */
    if (ret == 1 && (n_cand = summarize_block(&b, &cand, &sum, &ok)) < 0) ret = n_cand;
    if (ret == 1) {
        size_t room = n_cand > 0 ? (size_t)n_cand : 1;
        *out = malloc(room * sizeof **out);
        sums = malloc(room * sizeof *sums);
        points = malloc(room * sizeof *points);
        hashes = malloc(room * sizeof *hashes);
        tweaks = malloc(room * sizeof *tweaks);
        if (!*out || !sums || !points || !hashes || !tweaks) ret = SPN_ENOMEM;
    }
    for (long k = 0; ret == 1 && k < n_cand; k++) {
        if (!ok[k]) continue;
        sums[n] = sum[k].sum;
        memcpy(hashes[n], sum[k].input_hash32, 32);
        txid(&b.txs[cand[k]], (*out)[n].txid32);
        n++;
    }
    if (ret == 1 && n > 0) {
        size_t kept = 0;
        spn_engine_active->tweaks(sums, (const unsigned char(*)[32])hashes, n, points, tweaks);
        for (size_t i = 0; i < n; i++) { /* input_hash out of range: not listed (probability 2^-128) */
            if (tweaks[i][0] == 0) continue;
            memmove((*out)[kept].txid32, (*out)[i].txid32, 32);
            memcpy((*out)[kept++].tweak33, tweaks[i], 33);
        }
        n = kept;
    }
    block_free(&b);
    free(cand);
    free(sum);
    free(ok);
    free(sums);
    free(hashes);
    free(tweaks);
    free(points);
    if (ret != 1) {
        free(*out);
        *out = NULL;
        return ret;
    }
    return (long)n;
}

/* Scanning a block: every SP tx with taproot outputs is summarized (A, input_hash), then the
 * whole block goes through spn_scan_batch at once (ecdh = (b_scan·input_hash)·A per tx). */
long spn_block_scan(const unsigned char *block, size_t block_len, const unsigned char *spent, size_t spent_len,
                    const spn_scanner *sc, spn_block_match **out) {
    block_t b;
    size_t n_sp = 0, cap_sums = 0, cap_hashes = 0, cap_txs = 0, cap_first = 0, n_x = 0, cap_x = 0, cap_v = 0, bad;
    secp256k1_pubkey *sums = NULL;
    unsigned char(*hashes)[32] = NULL;
    size_t *txs = NULL, *first = NULL, *vouts = NULL; /* per SP tx: its block index; per output: its vout */
    const unsigned char **xs = NULL;
    spn_batch_found *found = NULL;
    size_t *cand = NULL;
    spn_summary *sum = NULL;
    unsigned char *ok = NULL;
    long n_cand = 0, n = 0, ret = load(&b, block, block_len, spent, spent_len);
    *out = NULL;
    if (ret == 1 && (n_cand = summarize_block(&b, &cand, &sum, &ok)) < 0) ret = n_cand;
    for (long k = 0; ret == 1 && k < n_cand; k++) {
        size_t i = cand[k];
        const tx_t *tx = &b.txs[i];
        const spn_summary *s = &sum[k];
        if (!ok[k]) continue;
        if (!grow((void **)&sums, &cap_sums, n_sp + 1, sizeof *sums) ||
            !grow((void **)&hashes, &cap_hashes, n_sp + 1, sizeof *hashes) ||
            !grow((void **)&txs, &cap_txs, n_sp + 1, sizeof *txs) ||
            !grow((void **)&first, &cap_first, n_sp + 2, sizeof *first) ||
            !grow((void **)&xs, &cap_x, n_x + tx->n_out, sizeof *xs) ||
            !grow((void **)&vouts, &cap_v, n_x + tx->n_out, sizeof *vouts)) {
            ret = SPN_ENOMEM;
            break;
        }
        first[n_sp] = n_x;
        for (size_t j = 0; j < tx->n_out; j++) {
            const txout_t *o = &b.outs[tx->first_out + j];
            if (!is_taproot(o)) continue;
            xs[n_x] = o->script.p + 2;
            vouts[n_x++] = j;
        }
        sums[n_sp] = s->sum;
        memcpy(hashes[n_sp], s->input_hash32, 32);
        txs[n_sp++] = i;
    }
    if (ret == 1 && n_sp) {
        first[n_sp] = n_x;
        spn_batch batch = {n_sp, NULL, 0, sums, (const unsigned char(*)[32])hashes, xs, first};
        if ((n = spn_scan_batch(sc, &batch, 1, &found, &bad)) < 0) ret = n;
    }
    if (ret == 1 && n > 0 && (*out = malloc((size_t)n * sizeof **out)) == NULL) ret = SPN_ENOMEM;
    for (long f = 0, from = 0; ret == 1 && f < n; f++) {
        const spn_batch_found *fo = &found[f];
        const tx_t *tx = &b.txs[txs[fo->tx]];
        spn_block_match *m = &(*out)[f];
        size_t j = first[fo->tx] + fo->index;
        if (f == 0 || fo->tx != found[f - 1].tx) {
            from = f;
            txid(tx, m->txid32);
        } else {
            memcpy(m->txid32, (*out)[from].txid32, 32);
        }
        m->vout = (uint32_t)vouts[j];
        m->amount = b.outs[tx->first_out + vouts[j]].value;
        memcpy(m->output32, xs[j], 32);
        memcpy(m->tweak32, fo->tweak32, 32);
        m->label = fo->label;
        /* Within a tx the matches are listed in vout order: insertion sort, K is small. */
        for (long c = f; c > from && (*out)[c - 1].vout > (*out)[c].vout; c--) {
            spn_block_match t = (*out)[c];
            (*out)[c] = (*out)[c - 1];
            (*out)[c - 1] = t;
            spn_cleanse(&t, sizeof t);
        }
    }
    if (found) spn_cleanse(found, (size_t)(n > 0 ? n : 0) * sizeof *found);
    free(found);
    free(cand);
    free(sum);
    free(ok);
    free(sums);
    free(hashes);
    free(txs);
    free(first);
    free(xs);
    free(vouts);
    block_free(&b);
    if (ret != 1) {
        if (*out) spn_cleanse(*out, (size_t)n * sizeof **out);
        free(*out);
        *out = NULL;
        return ret;
    }
    return n;
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* tweak64 = x ‖ y of a tweak point. */
static void put_tweak64(unsigned char tweak64[64], const secp256k1_pubkey *t) {
    unsigned char ser65[65];
    size_t len = sizeof ser65;
    spn_secp.ec_pubkey_serialize(spn_ctx.public, ser65, &len, t, SPN_SECP_EC_UNCOMPRESSED);
    memcpy(tweak64, ser65 + 1, 64);
}

void spn_block_index_free(spn_block_index *x) {
    free(x->txids32);
    free(x->tweaks33);
    free(x->tweaks64);
    free(x->out_counts4);
    free(x->max_values8);
    free(x->out_vouts4);
    free(x->out_keys32);
    free(x->out_values8);
    free(x->taproot_keys32);
    free(x->spent_outpoints36);
    free(x->spent_keys8);
    memset(x, 0, sizeof *x);
}

/* Buffers sized for the most the block can need: every tx eligible, every output taproot. */
static int index_alloc(spn_block_index *x, const block_t *b) {
    size_t txs = b->n_tx ? b->n_tx : 1, outs = b->n_outs ? b->n_outs : 1, ins = b->n_ins ? b->n_ins : 1;
    x->txids32 = malloc(txs * 32);
    x->tweaks33 = malloc(txs * 33);
    x->tweaks64 = malloc(txs * 64);
    x->out_counts4 = malloc(txs * 4);
    x->max_values8 = malloc(txs * 8);
    x->out_vouts4 = malloc(outs * 4);
    x->out_keys32 = malloc(outs * 32);
    x->out_values8 = malloc(outs * 8);
    x->taproot_keys32 = malloc(outs * 32);
    x->spent_outpoints36 = malloc(ins * 36);
    x->spent_keys8 = malloc(ins * 8);
    return x->txids32 && x->tweaks33 && x->tweaks64 && x->out_counts4 && x->max_values8 && x->out_vouts4 &&
           x->out_keys32 && x->out_values8 && x->taproot_keys32 && x->spent_outpoints36 && x->spent_keys8;
}

/* One eligible tx's row: its taproot outputs (already known to exist) and the largest value. */
static void index_tx(spn_block_index *x, const block_t *b, const tx_t *tx) {
    uint32_t count = 0;
    int64_t max_value = 0;
    txid(tx, x->txids32 + 32 * x->n_tx);
    for (size_t j = 0; j < tx->n_out; j++) {
        const txout_t *o = &b->outs[tx->first_out + j];
        if (!is_taproot(o)) continue;
        put_u32(x->out_vouts4 + 4 * x->n_out, (uint32_t)j);
        memcpy(x->out_keys32 + 32 * x->n_out, o->script.p + 2, 32);
        put_u64(x->out_values8 + 8 * x->n_out, (uint64_t)o->value);
        if (o->value > max_value) max_value = o->value;
        x->n_out++;
        count++;
    }
    put_u32(x->out_counts4 + 4 * x->n_tx, count);
    put_u64(x->max_values8 + 8 * x->n_tx, (uint64_t)max_value);
    x->n_tx++;
}

int spn_block_index_build(const unsigned char *block, size_t block_len, const unsigned char *spent, size_t spent_len,
                          spn_block_index *out) {
    block_t b;
    secp256k1_pubkey *sums = NULL, *points = NULL;
    unsigned char(*hashes)[32] = NULL, (*tweaks)[33] = NULL, *ok = NULL;
    size_t *which = NULL, *cand = NULL, n_sp = 0, next = 0;
    spn_summary *sum = NULL;
    long n_cand = 0;
    int ret = load(&b, block, block_len, spent, spent_len);
    memset(out, 0, sizeof *out);
    if (ret == 1 && (n_cand = summarize_block(&b, &cand, &sum, &ok)) < 0) ret = (int)n_cand;
    if (ret == 1 && !index_alloc(out, &b)) ret = SPN_ENOMEM;
    if (ret == 1) { /* room for every tx to be eligible */
        size_t txs = b.n_tx ? b.n_tx : 1;
        sums = malloc(txs * sizeof *sums);
        points = malloc(txs * sizeof *points);
        hashes = malloc(txs * sizeof *hashes);
        tweaks = malloc(txs * sizeof *tweaks);
        which = malloc(txs * sizeof *which);
        if (!sums || !points || !hashes || !tweaks || !which) ret = SPN_ENOMEM;
    }
    if (ret == 1) {
        spn_sha256 h;
        unsigned char first[32];
        spn_sha256_init(&h);
        spn_sha256_write(&h, block, HEADER);
        spn_sha256_finalize(&h, first);
        spn_sha256_init(&h);
        spn_sha256_write(&h, first, 32);
        spn_sha256_finalize(&h, out->hash32);
        memcpy(out->prev32, block + 4, 32);
        out->time = (uint32_t)block[68] | (uint32_t)block[69] << 8 | (uint32_t)block[70] << 16 | (uint32_t)block[71] << 24;
        out->block_txs = b.n_tx;
    }
    for (size_t i = 0; ret == 1 && i < b.n_tx; i++) {
        const tx_t *tx = &b.txs[i];
        for (size_t j = 0; j < tx->n_out; j++) {
            const txout_t *o = &b.outs[tx->first_out + j];
            if (is_taproot(o)) memcpy(out->taproot_keys32 + 32 * out->n_keys++, o->script.p + 2, 32);
        }
        if (i == 0) continue; /* the coinbase spends nothing and is never eligible */
        for (size_t j = 0; j < tx->n_in; j++) {
            const spn_input *in = &b.ins[tx->first_in + j];
            if (!is_taproot_script(&in->prevout)) continue;
            memcpy(out->spent_keys8 + 8 * out->n_spent, in->prevout.p + 2, 8);
            memcpy(out->spent_outpoints36 + 36 * out->n_spent++, in->outpoint36, 36);
        }
        /* summarize_block's candidates are this loop's txs with a taproot output, in order */
        if (next < (size_t)n_cand && cand[next] == i) {
            const spn_summary *s = &sum[next];
            if (ok[next++]) {
                sums[n_sp] = s->sum;
                memcpy(hashes[n_sp], s->input_hash32, 32);
                which[n_sp++] = i;
            }
        }
    }
    /* All of the block's tweaks input_hash·A in one engine call, then the rows in block order. */
    if (ret == 1 && n_sp > 0) spn_engine_active->tweaks(sums, (const unsigned char(*)[32])hashes, n_sp, points, tweaks);
    for (size_t k = 0; ret == 1 && k < n_sp; k++) {
        if (tweaks[k][0] == 0) continue; /* input_hash out of range: not indexed (probability 2^-128) */
        memcpy(out->tweaks33 + 33 * out->n_tx, tweaks[k], 33);
        put_tweak64(out->tweaks64 + 64 * out->n_tx, &points[k]);
        index_tx(out, &b, &b.txs[which[k]]);
    }
    free(sums);
    free(points);
    free(hashes);
    free(tweaks);
    free(which);
    free(cand);
    free(sum);
    free(ok);
    block_free(&b);
    if (ret != 1) spn_block_index_free(out);
    return ret;
}
