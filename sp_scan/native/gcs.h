/* BIP158 Golomb-coded sets: the hash-to-range map, sorting and Golomb-Rice coding.
 * Public data only (block hashes, output keys): nothing here is secret or wiped. */
#ifndef SPN_GCS_H
#define SPN_GCS_H

#include <stddef.h>
#include <stdint.h>

#include "siphash.h"

/* Map a 64-bit hash uniformly into [0, f): the high 64 bits of the 128-bit product hash * f. */
static inline uint64_t spn_gcs_map(uint64_t hash, uint64_t f) {
    return (uint64_t)(((unsigned __int128)hash * f) >> 64);
}

/* Sort vals[0..n) ascending in place; tmp must hold n values. Duplicates are kept. */
void spn_gcs_sort(uint64_t *vals, uint64_t *tmp, size_t n);

/* Number of bytes the Golomb-Rice coding of the deltas of sorted[0..n) takes with parameter p
 * (1 <= p <= 32), zero-padded to a whole byte. */
size_t spn_gcs_encoded_size(const uint64_t *sorted, size_t n, int p);

/* Write the Golomb-Rice coding of the deltas of sorted[0..n) (first delta from 0) to out, which
 * must hold spn_gcs_encoded_size(sorted, n, p) bytes: per delta, (delta >> p) one bits, a zero
 * bit, then the low p bits most significant first; the last byte is zero-padded. */
void spn_gcs_encode(const uint64_t *sorted, size_t n, int p, unsigned char *out);

/* Match queries against a coded set: the Golomb-Rice stream in[0..len) of n sorted values (as
 * spn_gcs_encode writes it, p as there) is decoded once, merged with the n_q queries
 * queries[i].value, which must be sorted ascending by value; hit[queries[i].index] = 1 for every
 * query whose value the set holds. Returns 1, or 0 when the stream ends before its n values.
 * Public data only: variable time. */
typedef struct {
    uint64_t value;
    size_t index;
} spn_gcs_query;
int spn_gcs_match(const unsigned char *in, size_t len, uint64_t n, int p, const spn_gcs_query *queries, size_t n_q,
                  unsigned char *hit);

#endif
