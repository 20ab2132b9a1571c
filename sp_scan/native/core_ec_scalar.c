/* The scalar engine core: core_ec_group.h over the portable backend with one lane (128-bit
 * products), for every CPU without a vector engine (ARM64 included). Plain C: no intrinsics. */
/* Built at -O3 with GCC: its vectorizer turns the comb's masked table scans into vector code. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "core_ec.h"

static int any_cpu(void) { return 1; }

#define SPN_LANES 1
#define SPN_EC_CORE spn_ec_scalar
#define SPN_EC_LABEL "scalar"
#define SPN_EC_CPU any_cpu
#include "core_lanes_c.h"
#include "core_ec_group.h"
