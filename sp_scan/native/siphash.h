/* SipHash-2-4: the BIP158 filters' item hash (gcs.c) and the keyed slot hash of the index writer's
 * output map (core_outputs.c). Public data or a process's own random key: nothing here is secret. */
#ifndef SPN_SIPHASH_H
#define SPN_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of in[0..len) under the 16-byte key key16 (k0 = LE64 of bytes 0..7, k1 of 8..15). */
uint64_t spn_siphash24(const unsigned char key16[16], const unsigned char *in, size_t len);

#endif
