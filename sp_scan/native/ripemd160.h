/* RIPEMD160 (portable C, 8-lane AVX2 for digests) and HASH160 = RIPEMD160(SHA256(x)) for P2PKH
 * matching. Public data only: these functions wipe nothing. */
#ifndef SPN_RIPEMD160_H
#define SPN_RIPEMD160_H

#include <stddef.h>

/* out20 = RIPEMD160(data[0..len)); data may be NULL when len == 0. */
void spn_ripemd160(const unsigned char *data, size_t len, unsigned char out20[20]);
/* out20 = RIPEMD160(SHA256(data[0..len))). */
void spn_hash160(const unsigned char *data, size_t len, unsigned char out20[20]);
/* out20 = HASH160 of a 33-byte compressed key: one SHA256 block, one RIPEMD160 block. */
void spn_hash160_33(const unsigned char in33[33], unsigned char out20[20]);
/* out20[i] = HASH160(in33[i][0..33)) for i < n (n may be 0). Several at a time: two SHA-NI
 * chains side by side, eight RIPEMD160 lanes with AVX2, as spn_sha256_select allowed. */
void spn_hash160_33_many(const unsigned char *const *in33, size_t n, unsigned char (*out20)[20]);
/* RIPEMD160 path of spn_hash160_33_many: "avx2" or "portable". */
const char *spn_hash160_impl(void);

#endif
