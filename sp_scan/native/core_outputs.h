/* The index writer's map of unspent tracked outputs: outpoint -> (height, ordinal) of the taproot output of
 * an indexed eligible tx, so a block's spends are resolved without reading older blocks. Open addressing
 * with linear probing over a keyed 64-bit hash of the outpoint (SipHash-2-4 under a random key, so no one
 * can choose outpoints that pile up in one run, or that pass for another's); a slot holds that hash, a
 * 16-bit check of the txid's bytes 16..17 (an 80-bit identity: two outpoints of one map pass for one with
 * probability ~n/2^80), the height (24 bits) and the ordinal (24 bits). Public data only: variable time. */
#ifndef SPN_CORE_OUTPUTS_H
#define SPN_CORE_OUTPUTS_H

#include <stddef.h>
#include <stdint.h>

#define SPN_OUTMAP_MAX_HEIGHT 0xffffffu  /* heights and ordinals an entry holds: 24 bits each */
#define SPN_OUTMAP_MAX_ORDINAL 0xffffffu

typedef struct {
    uint64_t hash;  /* the outpoint's keyed hash, 0 for an empty slot */
    uint64_t entry; /* check16 << 48 | height << 24 | ordinal */
} spn_outmap_slot;

typedef struct {
    spn_outmap_slot *slot;
    size_t mask; /* slots - 1 (a power of two) */
    size_t count;
    unsigned char key[16];
} spn_outmap;

/* An outpoint as the map knows it: its keyed slot hash (never 0) and its 16-bit check. */
typedef struct {
    uint64_t hash, check;
} spn_outmap_id;

/* An empty map under key16 (random: the caller's); 1, or 0 when out of memory. */
int spn_outmap_init(spn_outmap *m, const unsigned char key16[16]);
void spn_outmap_free(spn_outmap *m);

/* outpoint36's id in map m; with `prefetch`, the slot it starts at is fetched into the cache meanwhile
 * (a batch identifies its outpoints first, then looks them up: the memory waits overlap). */
spn_outmap_id spn_outmap_identify(const spn_outmap *m, const unsigned char outpoint36[36], int prefetch);

/* Add `id` at (height, ordinal) unless the map holds it (the first stays). 1 added, 0 held, -1 out of
 * memory; height and ordinal must be at most SPN_OUTMAP_MAX_*. */
int spn_outmap_put(spn_outmap *m, spn_outmap_id id, uint32_t height, uint32_t ordinal);

/* Remove `id`, giving its place: 1 found (and removed), 0 absent. */
int spn_outmap_take(spn_outmap *m, spn_outmap_id id, uint32_t *height, uint32_t *ordinal);

/* Remove `id` when the map holds it at `height` (a block rolled back): 1 removed, 0 not there. */
int spn_outmap_drop(spn_outmap *m, spn_outmap_id id, uint32_t height);

#endif
