/* Shared declarations of the _core extension: libsecp256k1 through function pointers taken
 * from coincurve's compiled module, the process-wide ECC contexts, and the BIP352 stages in C.
 * Every function returns int 1/0 (or a count, or a negative SPN_E* code) with out-params. */
#ifndef SPN_CORE_H
#define SPN_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core_ec.h"
#include "sha256.h"

/* ---- libsecp256k1 (upstream include/secp256k1.h, secp256k1_ecdh.h signatures) ---- */

typedef struct secp256k1_context_struct secp256k1_context;
typedef struct { unsigned char data[64]; } secp256k1_pubkey;
typedef int (*secp256k1_ecdh_hash_function)(unsigned char *output, const unsigned char *x32,
                                            const unsigned char *y32, void *data);

#define SPN_SECP_CONTEXT_NONE 1u
#define SPN_SECP_EC_COMPRESSED 258u
#define SPN_SECP_EC_UNCOMPRESSED 2u

typedef struct {
    secp256k1_context *(*context_create)(unsigned int flags);
    void (*context_destroy)(secp256k1_context *ctx);
    int (*context_randomize)(secp256k1_context *ctx, const unsigned char *seed32);
    void (*context_set_illegal_callback)(secp256k1_context *ctx, void (*fun)(const char *message, void *data),
                                         const void *data);
    int (*ec_pubkey_parse)(const secp256k1_context *ctx, secp256k1_pubkey *pubkey, const unsigned char *input,
                           size_t inputlen);
    int (*ec_pubkey_serialize)(const secp256k1_context *ctx, unsigned char *output, size_t *outputlen,
                               const secp256k1_pubkey *pubkey, unsigned int flags);
    int (*ec_pubkey_combine)(const secp256k1_context *ctx, secp256k1_pubkey *out,
                             const secp256k1_pubkey *const *ins, size_t n);
    int (*ec_pubkey_negate)(const secp256k1_context *ctx, secp256k1_pubkey *pubkey);
    int (*ec_pubkey_tweak_mul)(const secp256k1_context *ctx, secp256k1_pubkey *pubkey, const unsigned char *tweak32);
    int (*ec_pubkey_create)(const secp256k1_context *ctx, secp256k1_pubkey *pubkey, const unsigned char *seckey);
    int (*ec_seckey_verify)(const secp256k1_context *ctx, const unsigned char *seckey);
    int (*ec_seckey_negate)(const secp256k1_context *ctx, unsigned char *seckey);
    int (*ec_seckey_tweak_add)(const secp256k1_context *ctx, unsigned char *seckey, const unsigned char *tweak32);
    int (*ec_seckey_tweak_mul)(const secp256k1_context *ctx, unsigned char *seckey, const unsigned char *tweak32);
    int (*ecdh)(const secp256k1_context *ctx, unsigned char *output, const secp256k1_pubkey *pubkey,
                const unsigned char *seckey, secp256k1_ecdh_hash_function hashfp, void *data);
} spn_secp_api;

/* Filled once by spn_secp_bind (module init); read-only afterwards. */
extern spn_secp_api spn_secp;

/* The process's two contexts (like Core's ECC_Context): `secret` for private-key work
 * (sending), `public` for scanning. Both are created and randomized at first use by
 * spn_ecc_start (call with the GIL held), destroyed at exit; read-only, so threads share them. */
typedef struct {
    secp256k1_context *secret;
    secp256k1_context *public;
} spn_ecc;

/* 1 when both contexts exist (creating them the first time), 0 on failure. */
int spn_ecc_start(void);
extern spn_ecc spn_ctx;
/* Destroy both contexts (registered with Py_AtExit), unless a call running without the GIL
 * (spn_ecc_enter/leave) is still using them: a daemon thread at exit. */
void spn_ecc_stop(void);
void spn_ecc_enter(void);
void spn_ecc_leave(void);

/* ---- helpers ---- */

/* ECDH "hash" that returns the point itself: out33 = 0x02|(y&1) ‖ x. */
int spn_ecdh_point33(unsigned char *out33, const unsigned char *x32, const unsigned char *y32, void *data);
/* out33 = ser_P(p). */
void spn_ser33(const secp256k1_context *ctx, unsigned char out33[33], const secp256k1_pubkey *p);
/* Parse a 33-byte compressed point (prefix 02/03, on the curve); 1 ok, 0 not a point. */
int spn_parse33(const secp256k1_context *ctx, secp256k1_pubkey *p, const unsigned char in33[33]);
/* The point with x-coordinate x32 and even Y; 1 ok, 0 off the curve. */
int spn_lift_x(const secp256k1_context *ctx, secp256k1_pubkey *p, const unsigned char x32[32]);

/* ---- x-coordinate validity without a square root (core_fe.c; variable time: public data) ---- */

/* 1 when x32 (big-endian) is the x of a curve point (x < p, x³+7 a square mod p), 0 when not,
 * -1 when the Jacobi symbol computation gave up (not seen in practice). */
int spn_is_x_var(const unsigned char x32[32]);
/* 1 valid x, 0 not: spn_is_x_var, falling back to libsecp256k1's parse when it gives up. */
int spn_valid_x(const unsigned char x32[32]);

enum { SPN_K_MAX = 2323 };

/* Negative results shared by the stages; the module maps them to typed Python errors. */
enum {
    SPN_ENOMEM = -1,
    SPN_EKEY = -2,      /* invalid key or width */
    SPN_EBLOCK = -3,    /* the block does not parse */
    SPN_ESPENT = -4,    /* the spent-outputs data does not parse */
    SPN_ESHAPE = -5,    /* the spent outputs do not match the block's inputs */
    SPN_ESEND = -6,     /* no recipient / no inputs / input_hash out of range */
    SPN_EKEYSUM = -7,   /* private keys sum to zero */
    SPN_EKMAX = -8,     /* more than K_max outputs for one scan key */
    SPN_EUNDO = -9,     /* Core's undo data does not parse */
};

/* ---- extraction and summary (core_extract.c) ---- */

typedef struct {
    const unsigned char *p;
    size_t n;
} spn_span;

/* One input as extraction sees it: the witness is reduced to its item count and last two items. */
typedef struct {
    unsigned char outpoint36[36];
    spn_span prevout, script_sig;
    size_t wit_count;
    spn_span wit_last, wit_prev; /* items count-1 and count-2, when they exist */
} spn_input;

enum { SPN_KEY_NONE = 0, SPN_KEY_COMPRESSED = 1, SPN_KEY_XONLY = 2 };

/* 1 when the scriptPubKey is a witness program of version 2..16 (the whole tx is ineligible). */
int spn_is_witness_unknown(const spn_span *script);
/* The key an input contributes: SPN_KEY_COMPRESSED (ser33 = the key), SPN_KEY_XONLY (ser33 =
 * 02‖x, key lifted to even Y) or SPN_KEY_NONE. key may be NULL. Uses the public context. */
int spn_input_pubkey(const spn_input *in, secp256k1_pubkey *key, unsigned char ser33[33]);

typedef struct {
    unsigned char outpoint_smallest36[36];
    unsigned char pubkey_sum33[33];
    unsigned char input_hash32[32];
    secp256k1_pubkey sum; /* A */
} spn_summary;

/* Summarize a tx: 1 SP tx (out filled), 0 not an SP tx, SPN_ENOMEM. */
int spn_summarize(const spn_input *ins, size_t n, spn_summary *out);
/* Summarize n txs at once (tx i: inputs ins[i][0 .. n_ins[i])), their keys parsed and summed by the active
 * engine in one call (key_sums): ok[i] = 1 and out[i] filled for an SP tx, ok[i] = 0 for any other.
 * Returns 1 or SPN_ENOMEM. */
int spn_summarize_many(const spn_input *const *ins, const size_t *n_ins, size_t n, spn_summary *out, unsigned char *ok);
/* tweak33 = ser_P(input_hash·A); 1 ok, 0 failure. */
int spn_summary_tweak(const spn_summary *s, unsigned char tweak33[33]);

/* ---- scanning (core_scan.c) ---- */

typedef struct {
    unsigned char scan_key32[32]; /* b_scan: wiped by spn_scanner_free */
    uint64_t scan_key_words[4];   /* b_scan for the lane engines: little-endian words, and */
    spn_glv scan_key_glv;         /*   its GLV split and digits, computed once (constant time); wiped */
    secp256k1_pubkey spend;       /* B_spend */
    size_t n_labels;
    secp256k1_pubkey *label_point;   /* L_m, given order */
    unsigned char (*label_tweak)[32]; /* ℓ_m, given order; wiped */
    uint32_t *label_m;
    unsigned char (*sorted_ser)[33]; /* ser_P(L_m) sorted bytewise */
    uint32_t *sorted_index;          /* sorted position -> given index */
} spn_scanner;

enum { SPN_STRATEGY_AUTO = 0, SPN_STRATEGY_BIP = 1, SPN_STRATEGY_LABELSET = 2 };
/* Label strategy used by every scan of the process (tests force one; AUTO picks per tx). */
extern int spn_label_strategy;

/* Build from b_scan, B_spend and n labels (m, ser_P(L_m), ℓ_m): 1 ok, SPN_EKEY, SPN_ENOMEM. */
int spn_scanner_init(spn_scanner *sc, const unsigned char scan_key32[32], const unsigned char spend33[33],
                     size_t n_labels, const uint32_t *m, const unsigned char (*label33)[33],
                     const unsigned char (*tweak32)[32]);
void spn_scanner_free(spn_scanner *sc);

/* t_k = hash_BIP0352/SharedSecret(ser_P(ecdh) ‖ ser32(k)) from `base`, the tagged context that
 * has absorbed ser_P(ecdh); the copy it hashes is wiped. */
void spn_t_k(const spn_sha256 *base, uint32_t k, unsigned char t_k32[32]);

/* The lowest i < n with removed[i] = 0 and x[i] = x32 (x[i]: an output's 32 bytes as 4 words), or -1; -1
 * when live is 0. Every output is compared in full and the answer accumulated under masks: no branch or
 * memory address depends on x32 (a candidate x(P_k) or x(P_k + L_m)), only the answer does, which a match
 * makes public. */
long spn_match_x(const uint64_t (*x)[4], const unsigned char *removed, size_t n, const unsigned char x32[32],
                 uint64_t live);

/* ---- the EC engine: a scan's curve work over a group of transactions ----
 *
 * The batch scan (spn_scan_batch) hands every elliptic-curve step to the active engine, a group
 * of up to SPN_GROUP transactions at a time (a multiple of 8 lanes). Points cross the interface as
 * libsecp256k1's secp256k1_pubkey (an affine point in libsecp's 64-byte form; an engine with its own
 * representation converts at the boundary). A serialized point whose first byte is 0 means "no
 * point" (infinity, or an invalid scalar). Functions are called without the GIL, from several
 * threads at once, with the public context only; they must not keep state between calls.
 * core_engine_secp.c is the engine built on libsecp256k1's public API. */
enum { SPN_GROUP = 64 };

typedef struct {
    const char *name;
    /* Parse n points of `width` bytes each: 33 (ser_P: 02/03 ‖ x) or 64 (x ‖ y, no square root).
     * 1 ok; 0 when one is not a point on the curve (x or y >= p, bad prefix), *bad = its index. */
    int (*parse_points)(const unsigned char *in, size_t width, size_t n, secp256k1_pubkey *points, size_t *bad);
    /* ecdh33[i] = ser_P(b_scan·s_i·T_i) with s_i = scalar32[i], or 1 when scalar32 is NULL.
     * Constant time in b_scan and s_i. ecdh33[i][0] = 0 when b_scan·s_i is 0 mod n. */
    void (*shared_secrets)(const spn_scanner *sc, const secp256k1_pubkey *points, const unsigned char (*scalar32)[32],
                           size_t n, unsigned char (*ecdh33)[33]);
    /* P_k: p_k[i] = B_spend + t_k[i]·G and p33[i] = ser_P(p_k[i]); constant time in t_k.
     * p33[i][0] = 0 when t_k[i] is not in [1, n) or the sum is infinity. p_k must be a valid
     * secp256k1_pubkey: the BIP-order label check (many labels, few outputs) adds it with libsecp. */
    void (*spend_points)(const spn_scanner *sc, const unsigned char (*t_k32)[32], size_t n, secp256k1_pubkey *p_k,
                         unsigned char (*p33)[33]);
    /* Label set: sums33[i·L + m] = ser_P(p_k[i] + L_m) for the scanner's L labels (given order),
     * first byte 0 at infinity; n <= SPN_GROUP. Public data: variable time allowed. */
    void (*label_sums)(const spn_scanner *sc, const secp256k1_pubkey *p_k, size_t n, unsigned char (*sums33)[33]);
    /* Light-client tweaks of an index: tweak[i] = s_i·A_i with s_i = input_hash32[i] and tweak33[i]
     * its ser_P; tweak33[i][0] = 0 (tweak[i] undefined) when s_i is 0 or >= n. Public data. */
    void (*tweaks)(const secp256k1_pubkey *sums, const unsigned char (*input_hash32)[32], size_t n,
                   secp256k1_pubkey *tweak, unsigned char (*tweak33)[33]);
    /* A_i = the sum of tx i's input keys for n txs at once: keys33[first[i] .. first[i+1]) (ser_P; an
     * x-only key as 02 ‖ x), each counted when it is a point on the curve. found[i] = 1 and sums[i] = A_i,
     * or found[i] = 0 when none of them is a point or they sum to infinity. Public data. 1 ok, 0 out
     * of memory. */
    int (*key_sums)(const unsigned char (*keys33)[33], const size_t *first, size_t n, secp256k1_pubkey *sums,
                     unsigned char *found);
} spn_engine;

extern const spn_engine spn_engine_secp;
/* The lane engines (core_engines.c over the cores of core_ec.h): usable once spn_engine_select picked them. */
extern const spn_engine spn_engine_ifma, spn_engine_avx2, spn_engine_scalar;
#ifdef SPN_TESTING
extern const spn_engine spn_engine_ifma_emu, spn_engine_avx2_emu;
#endif
/* The engine every scan uses: spn_engine_secp until spn_engine_select picks one (with the GIL held,
 * before any scan runs). */
extern const spn_engine *spn_engine_active;

/* Make `name` the active engine, starting it first: "ifma", "avx2", "scalar", "libsecp256k1" (and in
 * the test build "ifma-emu", "avx2-emu"), or "" for the best this CPU runs (ifma > avx2 > scalar). 1 ok; 0 when
 * the name is unknown or the engine cannot run here (not built, CPU or OS without its instructions,
 * an unexpected libsecp256k1 point layout), with a one-line reason in why. Call with the GIL held. */
int spn_engine_select(const char *name, char *why, size_t why_len);

/* ---- the batch scan (core_scan.c): every scan goes through it ---- */

typedef struct {
    size_t n;                                /* transactions */
    const unsigned char *tweaks;             /* n × tweak_width bytes (input_hash·A), or NULL: */
    size_t tweak_width;                      /*   33 or 64 */
    const secp256k1_pubkey *sums;            /* when tweaks is NULL: A of each tx */
    const unsigned char (*input_hash32)[32]; /*   and its input_hash */
    const unsigned char *const *outputs32;   /* every tx's x-only outputs, tx after tx */
    const size_t *first;                     /* n + 1 offsets: tx i owns outputs32[first[i] .. first[i+1]) */
} spn_batch;

typedef struct {
    size_t tx;         /* index in the batch */
    uint32_t index;    /* position among the tx's outputs */
    unsigned char tweak32[32];
    int64_t label;     /* m, or -1 for the unlabelled address */
} spn_batch_found;

enum { SPN_MAX_THREADS = 256 };

/* Scan a batch for one scanner with `threads` threads, at most SPN_MAX_THREADS and n (each a
 * contiguous slice of the txs; the calling thread takes the first; a thread that cannot be
 * started has its slice scanned by the caller). *out (malloc'd; the caller wipes and frees it)
 * lists the found outputs by tx, then k. Returns the count; SPN_EKEY when a tweak is not a point (*bad_tx = the
 * lowest such tx, nothing returned); SPN_ENOMEM. Safe without the GIL. */
long spn_scan_batch(const spn_scanner *sc, const spn_batch *b, size_t threads, spn_batch_found **out, size_t *bad_tx);

/* The k = 0 outputs a light client looks up in a filter: for each of n tweaks (width 33 or 64),
 * out32[i·(1 + L)] = x(P_0), P_0 = B_spend + t_0·G with t_0 from ser_P(b_scan·T_i), then x(P_0 + L_m)
 * for the scanner's L labels (given order); 32 zero bytes at infinity (or t_0 not below n). The
 * secrets (the shared secrets, t_0) meet constant-time code only and are wiped. `threads` as
 * spn_scan_batch. Returns 1; SPN_EKEY when a tweak is not a point (*bad = the lowest index); SPN_ENOMEM.
 * Safe without the GIL. */
long spn_k0_outputs(const spn_scanner *sc, const unsigned char *tweaks, size_t width, size_t n, size_t threads,
                    unsigned char *out32, size_t *bad);

/* ecdh33 = ser_P(scalar32·point): 1 ok, 0 invalid scalar. */
int spn_ecdh33(const secp256k1_context *ctx, unsigned char ecdh33[33], const secp256k1_pubkey *point,
               const unsigned char scalar32[32]);

/* ---- sending (core_send.c) ---- */

typedef struct {
    unsigned char scan33[33];
    unsigned char spend33[33];
} spn_recipient;

/* outputs32[i] pays recipients[i]. keys32: n_keys private keys, is_taproot[i] for each.
 * Returns 1, or SPN_ESEND / SPN_EKEY / SPN_EKEYSUM / SPN_EKMAX / SPN_ENOMEM. */
int spn_create_outputs(unsigned char (*outputs32)[32], const unsigned char (*outpoints36)[36], size_t n_outpoints,
                       const unsigned char (*keys32)[32], const unsigned char *is_taproot, size_t n_keys,
                       const spn_recipient *recipients, size_t n_recipients);
/* ecdh33 = ser_P((input_hash·a)·B_scan); same errors as spn_create_outputs. */
int spn_send_shared_secret(unsigned char ecdh33[33], const unsigned char (*outpoints36)[36], size_t n_outpoints,
                           const unsigned char (*keys32)[32], const unsigned char *is_taproot, size_t n_keys,
                           const unsigned char scan33[33]);

/* out32 = the sum of n_keys private keys mod n, each taproot key (is_taproot[i]) negated when its
 * point has odd Y. Returns 1, SPN_EKEY (a key is 0 or >= n) or SPN_EKEYSUM (the sum is 0). */
int spn_seckey_sum(unsigned char out32[32], const unsigned char (*keys32)[32], const unsigned char *is_taproot,
                   size_t n_keys);

/* ---- BIP374 DLEQ proofs (core_dleq.c) ---- */

/* proof64 = GenerateProof(a, B, r, G, m) without the final verification (the caller verifies with
 * the returned A = a·G and C = a·B, which are public). m32 may be NULL (no message). Returns 1,
 * 0 when the BIP says generation fails (a = 0 or a >= n, k = 0), or SPN_EKEY when b33 or g33 is
 * not a valid compressed point. a and the nonce only meet constant-time code; all are wiped. */
int spn_dleq_prove(unsigned char proof64[64], unsigned char a_pub33[33], unsigned char c33[33],
                   const unsigned char a32[32], const unsigned char b33[33], const unsigned char g33[33],
                   const unsigned char r32[32], const unsigned char *m32);
/* A BIP375 ECDH share for a set of input keys: a = spn_seckey_sum(keys), share33 = a·B_scan,
 * a_pub33 = a·G and proof64 its DLEQ proof (generator G, no message). Returns 1, SPN_EKEY,
 * SPN_EKEYSUM, or 0 when proof generation fails (k = 0). */
int spn_ecdh_share_prove(unsigned char share33[33], unsigned char a_pub33[33], unsigned char proof64[64],
                         const unsigned char (*keys32)[32], const unsigned char *is_taproot, size_t n_keys,
                         const unsigned char scan33[33], const unsigned char r32[32]);

/* ---- blocks (core_block.c) ---- */

typedef struct {
    unsigned char txid32[32];
    unsigned char tweak33[33];
} spn_tx_tweak;

typedef struct {
    unsigned char txid32[32];
    uint32_t vout;
    int64_t amount;
    unsigned char output32[32];
    unsigned char tweak32[32];
    int64_t label;
} spn_block_match;

/* Tweaks of the eligible txs of a block (block order). *out is malloc'd (free it). Returns the
 * count, or SPN_EBLOCK / SPN_ESPENT / SPN_ESHAPE / SPN_ENOMEM. Safe without the GIL. */
long spn_block_tweaks(const unsigned char *block, size_t block_len, const unsigned char *spent, size_t spent_len,
                      spn_tx_tweak **out);
/* Found outputs of a block for one scanner; *out malloc'd (wiped and freed by the caller). */
long spn_block_scan(const unsigned char *block, size_t block_len, const unsigned char *spent, size_t spent_len,
                    const spn_scanner *sc, spn_block_match **out);

/* What the tweak index keeps of one block, as packed little-endian arrays (one malloc'd buffer each;
 * spn_block_index_free releases them). Per eligible tx (block order): txid, input_hash·A compressed
 * (33) and uncompressed x‖y (64), its taproot output count, largest taproot value; per taproot output
 * of an eligible tx: vout u32, x-only key, value u64. Per block: the x-only key of every P2TR output
 * (all txs, coinbase included), the outpoint of every input spending a P2TR output and the first 8 bytes of
 * the key of the output it spends. */
typedef struct {
    unsigned char hash32[32], prev32[32];
    uint32_t time;
    size_t block_txs;     /* transactions in the block, coinbase included */
    size_t n_tx, n_out;   /* eligible txs, their taproot outputs */
    size_t n_keys, n_spent;
    unsigned char *txids32, *tweaks33, *tweaks64, *out_counts4, *max_values8; /* n_tx each */
    unsigned char *out_vouts4, *out_keys32, *out_values8;                    /* n_out each */
    unsigned char *taproot_keys32;                                           /* n_keys */
    unsigned char *spent_outpoints36, *spent_keys8;                          /* n_spent */
} spn_block_index;

/* Fill *out for one block: 1 ok, or SPN_EBLOCK / SPN_ESPENT / SPN_ESHAPE / SPN_ENOMEM (then *out holds
 * no memory). Safe without the GIL. */
int spn_block_index_build(const unsigned char *block, size_t block_len, const unsigned char *spent, size_t spent_len,
                          spn_block_index *out);
void spn_block_index_free(spn_block_index *x);

/* ---- Core's block files (core_corefiles.c) ---- */

/* 1 when the header commits to the block's transactions: the merkle root of the txids, and when a tx
 * has a witness, the coinbase's BIP141 commitment to the wtxids (its witness one 32-byte item); 0 when
 * not, or when the block does not parse; SPN_ENOMEM. Safe without the GIL. */
int spn_block_commits(const unsigned char *block, size_t len);

/* Core's CBlockUndo serialization (rev*.dat) in the REST spent-outputs form; *out malloc'd (free it).
 * Returns 1, SPN_EUNDO (truncated, trailing bytes, bad count or VARINT, amount above MAX_MONEY) or
 * SPN_ENOMEM. Safe without the GIL (the contexts must be started: uncompressed P2PK keys). */
int spn_spent_from_undo(const unsigned char *undo, size_t undo_len, unsigned char **out, size_t *out_len);

/* XOR data, read at `offset` of a block file, with Core's 8-byte obfuscation key (xor.dat), in place. */
void spn_unxor(unsigned char *data, size_t n, const unsigned char key8[8], uint64_t offset);

#endif
