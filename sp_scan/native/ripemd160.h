/* RIPEMD160 (portable C) and HASH160 = RIPEMD160(SHA256(x)) for P2PKH matching. */
#ifndef SPN_RIPEMD160_H
#define SPN_RIPEMD160_H

#include <stddef.h>

/* out20 = RIPEMD160(data[0..len)); data may be NULL when len == 0. */
void spn_ripemd160(const unsigned char *data, size_t len, unsigned char out20[20]);
/* out20 = RIPEMD160(SHA256(data[0..len))). */
void spn_hash160(const unsigned char *data, size_t len, unsigned char out20[20]);
/* out20 = HASH160 of a 33-byte compressed key: one SHA256 block, one RIPEMD160 block. */
void spn_hash160_33(const unsigned char in33[33], unsigned char out20[20]);

#endif
