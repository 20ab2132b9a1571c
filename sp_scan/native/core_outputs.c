/* The index writer's map of unspent tracked outputs (see core_outputs.h). */
#define _DEFAULT_SOURCE /* posix_memalign; madvise's MADV_HUGEPAGE (glibc) */
#include "core_outputs.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "siphash.h"

#define MIN_SLOTS 1024u
#define HUGE_PAGE ((size_t)2 << 20)

/* Zeroed slots; large arrays aligned to 2 MiB and, on Linux, asked for huge pages (a lookup's random slot
 * then costs one TLB entry in 512 fewer). */
static spn_outmap_slot *slots_alloc(size_t n) {
    size_t bytes = n * sizeof(spn_outmap_slot);
    if (bytes < HUGE_PAGE) return calloc(n, sizeof(spn_outmap_slot));
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    memset(p, 0, bytes);
    return p;
}

static int grow(spn_outmap *m, size_t slots) {
    spn_outmap_slot *slot = slots_alloc(slots);
    if (slot == NULL) return 0;
    for (size_t i = 0; m->slot != NULL && i <= m->mask; i++) {
        if (m->slot[i].hash == 0) continue;
        size_t j = m->slot[i].hash & (slots - 1);
        while (slot[j].hash != 0) j = (j + 1) & (slots - 1);
        slot[j] = m->slot[i];
    }
    free(m->slot);
    m->slot = slot, m->mask = slots - 1;
    return 1;
}

int spn_outmap_init(spn_outmap *m, const unsigned char key16[16]) {
    memset(m, 0, sizeof *m);
    memcpy(m->key, key16, 16);
    return grow(m, MIN_SLOTS);
}

void spn_outmap_free(spn_outmap *m) {
    free(m->slot);
    m->slot = NULL;
    m->count = 0;
}

spn_outmap_id spn_outmap_identify(const spn_outmap *m, const unsigned char outpoint36[36], int prefetch) {
    spn_outmap_id id;
    uint64_t h = spn_siphash24(m->key, outpoint36, 36);
    id.hash = h ? h : 1;
    id.check = (uint64_t)outpoint36[16] | (uint64_t)outpoint36[17] << 8;
    if (prefetch) __builtin_prefetch(&m->slot[id.hash & m->mask]);
    return id;
}

/* The slot holding id, or the empty slot where its run ends. */
static size_t find(const spn_outmap *m, spn_outmap_id id) {
    size_t i = id.hash & m->mask;
    while (m->slot[i].hash != 0 && !(m->slot[i].hash == id.hash && m->slot[i].entry >> 48 == id.check)) i = (i + 1) & m->mask;
    return i;
}

/* Empty slot i, shifting back the entries after it whose run it breaks (no tombstones). */
static void vacate(spn_outmap *m, size_t i) {
    for (size_t j = (i + 1) & m->mask; m->slot[j].hash != 0; j = (j + 1) & m->mask) {
        size_t home = m->slot[j].hash & m->mask;
        /* entry j stays when its home slot lies cyclically in (i, j] */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j)) continue;
        m->slot[i] = m->slot[j];
        i = j;
    }
    m->slot[i].hash = 0;
    m->count--;
}

int spn_outmap_put(spn_outmap *m, spn_outmap_id id, uint32_t height, uint32_t ordinal) {
    size_t i = find(m, id);
    if (m->slot[i].hash != 0) return 0;
    if (4 * (m->count + 1) > 3 * (m->mask + 1)) { /* load above 3/4: double */
        if (!grow(m, 2 * (m->mask + 1))) return -1;
        i = find(m, id);
    }
    m->slot[i].hash = id.hash;
    m->slot[i].entry = id.check << 48 | (uint64_t)height << 24 | ordinal;
    m->count++;
    return 1;
}

int spn_outmap_take(spn_outmap *m, spn_outmap_id id, uint32_t *height, uint32_t *ordinal) {
    size_t i = find(m, id);
    if (m->slot[i].hash == 0) return 0;
    *height = (uint32_t)(m->slot[i].entry >> 24 & SPN_OUTMAP_MAX_HEIGHT);
    *ordinal = (uint32_t)(m->slot[i].entry & SPN_OUTMAP_MAX_ORDINAL);
    vacate(m, i);
    return 1;
}

int spn_outmap_drop(spn_outmap *m, spn_outmap_id id, uint32_t height) {
    size_t i = find(m, id);
    if (m->slot[i].hash == 0 || (m->slot[i].entry >> 24 & SPN_OUTMAP_MAX_HEIGHT) != height) return 0;
    vacate(m, i);
    return 1;
}
