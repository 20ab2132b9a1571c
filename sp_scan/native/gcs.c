/* BIP158 Golomb-coded sets (see gcs.h). */
#include "gcs.h"

#include <string.h>

/* LSD radix sort, 11-bit digits, as many passes as the largest value needs. */
#define RADIX_BITS 11
#define RADIX_SIZE (1u << RADIX_BITS)

void spn_gcs_sort(uint64_t *vals, uint64_t *tmp, size_t n) {
    uint64_t max = 0;
    size_t count[RADIX_SIZE];
    uint64_t *src = vals, *dst = tmp;
    for (size_t i = 0; i < n; i++) max |= vals[i];
    for (int shift = 0; shift < 64 && (max >> shift) != 0; shift += RADIX_BITS) {
        size_t sum = 0;
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++) count[(src[i] >> shift) & (RADIX_SIZE - 1)]++;
        for (size_t d = 0; d < RADIX_SIZE; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & (RADIX_SIZE - 1)]++] = src[i];
        uint64_t *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != vals) memcpy(vals, src, n * sizeof *vals);
}

size_t spn_gcs_encoded_size(const uint64_t *sorted, size_t n, int p) {
    size_t bits = n * (size_t)(p + 1);
    uint64_t last = 0;
    for (size_t i = 0; i < n; i++) {
        bits += (size_t)((sorted[i] - last) >> p);
        last = sorted[i];
    }
    return (bits + 7) / 8;
}

/* Bits are shifted into acc (at most 7 pending + 32 new) and flushed a byte at a time. */
typedef struct {
    unsigned char *out;
    uint64_t acc;
    int pending;
} bit_writer;

static void put_bits(bit_writer *w, uint64_t value, int nbits) {
    w->acc = (w->acc << nbits) | value;
    w->pending += nbits;
    while (w->pending >= 8) {
        w->pending -= 8;
        *w->out++ = (unsigned char)(w->acc >> w->pending);
    }
}

void spn_gcs_encode(const uint64_t *sorted, size_t n, int p, unsigned char *out) {
    bit_writer w = {out, 0, 0};
    uint64_t last = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t delta = sorted[i] - last, q = delta >> p;
        last = sorted[i];
        for (; q >= 31; q -= 31) put_bits(&w, 0x7fffffffULL, 31);
        put_bits(&w, ((1ULL << q) - 1) << 1, (int)q + 1);
        put_bits(&w, delta & ((1ULL << p) - 1), p);
    }
    if (w.pending > 0) *w.out = (unsigned char)(w.acc << (8 - w.pending));
}

int spn_gcs_match(const unsigned char *in, size_t len, uint64_t n, int p, const spn_gcs_query *queries, size_t n_q,
                  unsigned char *hit) {
    const uint64_t bits = (uint64_t)len * 8;
    uint64_t pos = 0, value = 0;
    size_t j = 0;
    for (uint64_t k = 0; k < n && j < n_q; k++) {
        uint64_t quotient = 0, remainder = 0;
        for (;;) { /* unary quotient: one bits ended by a zero */
            if (pos >= bits) return 0;
            if (!((in[pos >> 3] >> (7 - (pos & 7))) & 1)) break;
            quotient++;
            pos++;
        }
        pos++;
        if (pos + (uint64_t)p > bits) return 0;
        for (int b = 0; b < p; b++, pos++) remainder = (remainder << 1) | ((in[pos >> 3] >> (7 - (pos & 7))) & 1);
        value += (quotient << p) | remainder;
        while (j < n_q && queries[j].value < value) j++;
        for (; j < n_q && queries[j].value == value; j++) hit[queries[j].index] = 1;
    }
    return 1;
}
