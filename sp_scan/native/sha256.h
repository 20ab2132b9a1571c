/* Streaming SHA256 with run-time selected compression (SHA-NI, ARMv8 SHA2, portable C),
 * BIP340 tagged hashes with precomputed midstates for the three BIP352 tags. */
#ifndef SPN_SHA256_H
#define SPN_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct { uint32_t s[8]; unsigned char buf[64]; uint64_t bytes; } spn_sha256;

/* Start a plain SHA256. */
void spn_sha256_init(spn_sha256 *h);
/* Absorb len bytes (data may be NULL when len == 0). Whole blocks go straight to the compression. */
void spn_sha256_write(spn_sha256 *h, const unsigned char *data, size_t len);
/* Write the 32-byte digest and wipe *h (it must be re-initialized before reuse). */
void spn_sha256_finalize(spn_sha256 *h, unsigned char out32[32]);

enum { SPN_TAG_INPUTS = 0, SPN_TAG_SHARED_SECRET = 1, SPN_TAG_LABEL = 2 };

/* Start SHA256(SHA256(tag)||SHA256(tag)||...) for a BIP352 tag from its precomputed midstate.
 * tag must be one of SPN_TAG_*; any other value is a caller bug (the Inputs tag is used). */
void spn_sha256_init_tagged(spn_sha256 *h, int tag);
/* out32 = tagged_hash(tag, msg[0..len)). */
void spn_tagged_sha256(int tag, const unsigned char *msg, size_t len, unsigned char out32[32]);

/* Pick the compression for this process: SHA-NI or ARMv8 SHA2 when the CPU has it, else portable;
 * and whether HASH160 may use AVX2 (CPU and OS support). The portable paths are forced for all
 * hashing when force_portable != 0 or the environment variable SP_SCAN_SHA256 equals "portable"
 * at call time. Call at module init (under the GIL); idempotent. */
void spn_sha256_select(int force_portable);
/* Name of the selected compression: "shani", "armv8" or "portable". */
const char *spn_sha256_impl(void);

/* Internal, shared with ripemd160.c: compress nblocks 64-byte blocks into s with the selected
 * implementation. */
void spn_sha256_transform(uint32_t s[8], const unsigned char *blocks, size_t nblocks);
/* Internal, for ripemd160.c: s[i] = the SHA256 state (digest words) of the 33-byte message
 * in33[i], for i < n. For public data only: nothing is wiped. */
void spn_sha256_33_public(const unsigned char *const *in33, size_t n, uint32_t (*s)[8]);
/* Internal, for ripemd160.c: 1 when spn_sha256_select allowed AVX2. */
int spn_cpu_avx2(void);
/* Internal: set n bytes at p to zero in a way the compiler cannot drop. */
void spn_wipe(void *p, size_t n);

#endif
