/* The scalar engine core: core_ec_group.h over the portable backend with one lane (the field on four
 * 64-bit words, core_fe64.h), for every CPU without a vector engine (ARM64 included). Plain C: no
 * vector intrinsics (x86-64's add-with-carry ones only). */
/* Built at -O3 with GCC: its loop vectorizer turns the comb's masked table scans into vector code.
 * Its SLP vectorizer stays off: it packs pairs of field words into vector registers and takes them
 * out again, which made b·T 15% slower and B + t·G 12% on Zen 4. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "no-tree-slp-vectorize")
#endif

#include "core_ec.h"

static int any_cpu(void) { return 1; }

#define SPN_LANES 1
#define SPN_EC_CORE spn_ec_scalar
#define SPN_EC_LABEL "scalar"
#define SPN_EC_CPU any_cpu
#include "core_lanes_c.h"
#include "core_ec_group.h"
