/* The libsecp256k1 peer of the light-client tweak benches (bench/test_tweaks.py): a batch of tweaks
 * scanned on libsecp256k1's public API as a C program would write it, one call for the whole batch,
 * so no Python runs per tweak. bench/peers.py builds it with the system C compiler; peer_bind resolves
 * libsecp256k1's functions by name in coincurve's compiled module (the library sp_scan.native binds),
 * already loaded in the process.
 *
 * Per tweak T (33 bytes ser_P, or 64 bytes x ‖ y parsed as 04 ‖ x ‖ y), S = b_scan·T by one of two calls:
 *   PEER_TWEAK_MUL: ec_pubkey_tweak_mul, then ec_pubkey_serialize. It runs secp256k1_ecmult, a
 *       variable-time multiplication: its time depends on b_scan. The fastest b·T the API offers.
 *   PEER_ECDH: secp256k1_ecdh (documented constant time), its hash function returning ser_P(S).
 * In both, P_k = B_spend + t_k·G is ec_pubkey_create (constant time in t_k) and ec_pubkey_combine:
 * faster in coincurve's build than ec_pubkey_tweak_add, whose secp256k1_ecmult is variable time too.
 * Then, for k = 0, 1, ...: t_k = tagged_sha256("BIP0352/SharedSecret", ser_P(S) ‖ ser_32(k)); the
 * tx's remaining outputs in their order, each matched if x(O) = x(P_k), else if x(O) = x(P_k + L)
 * (L the one label point, P_k + L by ec_pubkey_combine when first needed); the first match is taken
 * and k goes up; the tx's scan ends at its first k without a match, or at K_max. */
#define _GNU_SOURCE /* RTLD_NOLOAD, clock_gettime under -std=c11 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PEER_EXPORT __attribute__((visibility("default")))

/* ---- libsecp256k1's public API (include/secp256k1.h, secp256k1_ecdh.h) ---- */

typedef struct secp256k1_context_struct secp256k1_context;
typedef struct {
    unsigned char data[64];
} secp256k1_pubkey;
typedef int (*secp256k1_ecdh_hash_function)(unsigned char *output, const unsigned char *x32,
                                            const unsigned char *y32, void *data);

enum { SECP_CONTEXT_NONE = 1, SECP_EC_COMPRESSED = 258 }; /* SECP256K1_CONTEXT_NONE, SECP256K1_EC_COMPRESSED */

static struct {
    secp256k1_context *(*context_create)(unsigned int flags);
    int (*context_randomize)(secp256k1_context *ctx, const unsigned char *seed32);
    int (*ec_pubkey_parse)(const secp256k1_context *ctx, secp256k1_pubkey *pubkey, const unsigned char *input,
                           size_t inputlen);
    int (*ec_pubkey_serialize)(const secp256k1_context *ctx, unsigned char *output, size_t *outputlen,
                               const secp256k1_pubkey *pubkey, unsigned int flags);
    int (*ec_pubkey_combine)(const secp256k1_context *ctx, secp256k1_pubkey *out,
                             const secp256k1_pubkey *const *ins, size_t n);
    int (*ec_pubkey_create)(const secp256k1_context *ctx, secp256k1_pubkey *pubkey, const unsigned char *seckey);
    int (*ec_pubkey_tweak_mul)(const secp256k1_context *ctx, secp256k1_pubkey *pubkey, const unsigned char *tweak32);
    int (*ecdh)(const secp256k1_context *ctx, unsigned char *output, const secp256k1_pubkey *pubkey,
                const unsigned char *seckey, secp256k1_ecdh_hash_function hashfp, void *data);
    int (*tagged_sha256)(const secp256k1_context *ctx, unsigned char *hash32, const unsigned char *tag,
                         size_t taglen, const unsigned char *msg, size_t msglen);
} secp;

static const char *const SECP_NAMES[] = {
    "secp256k1_context_create",      "secp256k1_context_randomize", "secp256k1_ec_pubkey_parse",
    "secp256k1_ec_pubkey_serialize", "secp256k1_ec_pubkey_combine", "secp256k1_ec_pubkey_create",
    "secp256k1_ec_pubkey_tweak_mul", "secp256k1_ecdh",              "secp256k1_tagged_sha256",
};
enum { SECP_COUNT = sizeof SECP_NAMES / sizeof *SECP_NAMES };
_Static_assert(sizeof secp == SECP_COUNT * sizeof(void *), "one pointer per name");

static secp256k1_context *ctx;

enum { PEER_TWEAK_MUL = 0, PEER_ECDH = 1 };
enum { K_MAX = 2323 };
static const unsigned char TAG[] = "BIP0352/SharedSecret";

static void wipe(void *p, size_t n) {
    static void *(*volatile const set)(void *, int, size_t) = memset;
    set(p, 0, n);
}

/* Bind libsecp256k1 out of the shared object at library_path, which must already be loaded (RTLD_NOLOAD:
 * the copy coincurve imported), and create one context randomized with seed32. Returns 1, or 0 when the
 * library is not loaded, lacks a function, or the context cannot be made. Call once, before any scan. */
PEER_EXPORT int peer_bind(const char *library_path, const unsigned char *seed32) {
    if (ctx != NULL) return 1;
    void *lib = dlopen(library_path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) return 0;
    void *addresses[SECP_COUNT];
    for (size_t i = 0; i < SECP_COUNT; i++)
        if ((addresses[i] = dlsym(lib, SECP_NAMES[i])) == NULL) return 0;
    memcpy(&secp, addresses, sizeof secp); /* data pointers to functions: POSIX guarantees the conversion */
    secp256k1_context *c = secp.context_create(SECP_CONTEXT_NONE);
    if (c == NULL || !secp.context_randomize(c, seed32)) return 0;
    ctx = c;
    return 1;
}

/* secp256k1_ecdh's hash function for silent payments: output33 = ser_P of the point itself. */
static int point33(unsigned char *output33, const unsigned char *x32, const unsigned char *y32, void *data) {
    (void)data;
    output33[0] = (unsigned char)(0x02 | (y32[31] & 1));
    memcpy(output33 + 1, x32, 32);
    return 1;
}

typedef struct {
    int pipeline;
    const unsigned char *tweaks;
    size_t width;
    const unsigned char *outputs32;
    const uint32_t *counts;
    const size_t *first; /* first[i]: index of tx i's first output */
    const unsigned char *scan_key32;
    secp256k1_pubkey spend, label;
    int32_t *k_of; /* per output: the k it matched at, or -1 */
    size_t begin, end;
    int ok;
} peer_job;

/* Scan tx i of the job; 1 done, 0 the tweak does not parse or a call failed. */
static int scan_tx(const peer_job *job, size_t i) {
    const unsigned char *tweak = job->tweaks + i * job->width;
    const unsigned char *outputs32 = job->outputs32 + 32 * job->first[i];
    int32_t *k_of = job->k_of + job->first[i];
    const uint32_t n_outputs = job->counts[i];
    secp256k1_pubkey t, s, p_k, p_l, t_g;
    const secp256k1_pubkey *pair[2];
    unsigned char ser65[65], msg37[37], t_k32[32], p33[33], pl33[33];
    size_t len;
    int ok;

    for (uint32_t j = 0; j < n_outputs; j++) k_of[j] = -1;
    if (job->width == 64) {
        ser65[0] = 0x04;
        memcpy(ser65 + 1, tweak, 64);
        ok = secp.ec_pubkey_parse(ctx, &t, ser65, 65);
    } else {
        ok = secp.ec_pubkey_parse(ctx, &t, tweak, 33);
    }
    if (!ok) return 0;
    if (job->pipeline == PEER_TWEAK_MUL) {
        s = t;
        ok = secp.ec_pubkey_tweak_mul(ctx, &s, job->scan_key32);
        len = 33;
        if (ok) secp.ec_pubkey_serialize(ctx, msg37, &len, &s, SECP_EC_COMPRESSED);
    } else {
        ok = secp.ecdh(ctx, msg37, &t, job->scan_key32, point33, NULL);
    }
    uint32_t left = n_outputs;
    for (uint32_t k = 0; ok && k < K_MAX && left > 0; k++) {
        msg37[33] = (unsigned char)(k >> 24);
        msg37[34] = (unsigned char)(k >> 16);
        msg37[35] = (unsigned char)(k >> 8);
        msg37[36] = (unsigned char)k;
        ok = secp.tagged_sha256(ctx, t_k32, TAG, sizeof TAG - 1, msg37, sizeof msg37);
        pair[0] = &job->spend;
        pair[1] = &t_g;
        ok = ok && secp.ec_pubkey_create(ctx, &t_g, t_k32) && secp.ec_pubkey_combine(ctx, &p_k, pair, 2);
        if (!ok) break; /* t_k ≥ n or P_k at infinity: probability ~2^-128 */
        len = 33;
        secp.ec_pubkey_serialize(ctx, p33, &len, &p_k, SECP_EC_COMPRESSED);
        int labelled = 0;
        uint32_t hit = n_outputs;
        for (uint32_t j = 0; j < n_outputs && hit == n_outputs; j++) {
            if (k_of[j] >= 0) continue;
            if (memcmp(outputs32 + 32 * j, p33 + 1, 32) == 0) {
                hit = j;
                continue;
            }
            if (!labelled) {
                pair[0] = &p_k;
                pair[1] = &job->label;
                len = 33;
                if (secp.ec_pubkey_combine(ctx, &p_l, pair, 2)) secp.ec_pubkey_serialize(ctx, pl33, &len, &p_l, SECP_EC_COMPRESSED);
                else memset(pl33, 0, sizeof pl33); /* P_k = −L: x = 0 is no output */
                labelled = 1;
            }
            if (memcmp(outputs32 + 32 * j, pl33 + 1, 32) == 0) hit = j;
        }
        if (hit == n_outputs) break;
        k_of[hit] = (int32_t)k;
        left--;
    }
    wipe(&s, sizeof s);
    wipe(&p_k, sizeof p_k);
    wipe(&p_l, sizeof p_l);
    wipe(&t_g, sizeof t_g);
    wipe(msg37, sizeof msg37);
    wipe(t_k32, sizeof t_k32);
    wipe(p33, sizeof p33);
    wipe(pl33, sizeof pl33);
    return ok;
}

static void *scan_range(void *arg) {
    peer_job *job = arg;
    for (size_t i = job->begin; i < job->end && job->ok; i++) job->ok = scan_tx(job, i);
    return NULL;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Scan n tweaks of `width` bytes (33 or 64) for the receiver (scan_key32, spend33, one label point
 * label33) with `pipeline` (PEER_TWEAK_MUL or PEER_ECDH) on `threads` threads (1 to 64; tx slices in
 * order). Tx i has counts[i] x-only outputs, consecutive in outputs32 after tx i-1's. Writes k_of[j] per
 * output (the k it matched at, or -1) and the call's wall time in ns to *elapsed_ns. Returns 1; 0 when
 * the arguments are invalid, a key or tweak does not parse or a call fails; -1 out of memory or threads. */
PEER_EXPORT int peer_scan(int pipeline, const unsigned char *tweaks, size_t width, size_t n,
                          const unsigned char *outputs32, const uint32_t *counts, const unsigned char *scan_key32,
                          const unsigned char *spend33, const unsigned char *label33, int threads, int32_t *k_of,
                          uint64_t *elapsed_ns) {
    const uint64_t start = now_ns();
    if (ctx == NULL || (pipeline != PEER_TWEAK_MUL && pipeline != PEER_ECDH) || (width != 33 && width != 64) ||
        threads < 1 || threads > 64)
        return 0;
    peer_job base = {pipeline, tweaks, width, outputs32, counts, NULL, scan_key32, {{0}}, {{0}}, k_of, 0, n, 1};
    if (!secp.ec_pubkey_parse(ctx, &base.spend, spend33, 33) || !secp.ec_pubkey_parse(ctx, &base.label, label33, 33))
        return 0;
    size_t *first = malloc((n + 1) * sizeof *first);
    if (first == NULL) return -1;
    first[0] = 0;
    for (size_t i = 0; i < n; i++) first[i + 1] = first[i] + counts[i];
    base.first = first;

    peer_job jobs[64];
    pthread_t ids[64];
    int started = 1, result = 1;
    for (int t = 0; t < threads; t++) {
        jobs[t] = base;
        jobs[t].begin = n * (size_t)t / (size_t)threads;
        jobs[t].end = n * (size_t)(t + 1) / (size_t)threads;
    }
    for (int t = 1; t < threads; t++, started++)
        if (pthread_create(&ids[t], NULL, scan_range, &jobs[t]) != 0) {
            result = -1;
            break;
        }
    scan_range(&jobs[0]);
    for (int t = 1; t < started; t++) pthread_join(ids[t], NULL);
    for (int t = 0; t < started && result == 1; t++)
        if (!jobs[t].ok) result = 0;
    free(first);
    *elapsed_ns = now_ns() - start;
    return result;
}

/* Time n calls of the pipelines' tagged hash (a 37-byte message, the tag hashed anew each call, as
 * secp256k1_tagged_sha256 does); *elapsed_ns the total. Returns 1, 0 when not bound. */
PEER_EXPORT int peer_hash_loop(size_t n, uint64_t *elapsed_ns) {
    if (ctx == NULL) return 0;
    unsigned char msg37[37] = {0x02}, t_k32[32];
    const uint64_t start = now_ns();
    for (size_t i = 0; i < n; i++) {
        msg37[36] = (unsigned char)i;
        if (!secp.tagged_sha256(ctx, t_k32, TAG, sizeof TAG - 1, msg37, sizeof msg37)) return 0;
        msg37[1] ^= t_k32[0]; /* each hash depends on the last */
    }
    *elapsed_ns = now_ns() - start;
    return 1;
}
