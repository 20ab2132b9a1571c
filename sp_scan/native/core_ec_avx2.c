/* The 4-lane AVX2 engine core: core_ec_group.h over core_lanes_avx2.h (x86-64 only). */
#include "core_ec.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define SPN_EC_CORE spn_ec_avx2
#define SPN_EC_LABEL "avx2"
#define SPN_EC_CPU spn_has_avx2
#include "core_lanes_avx2.h"
#include "core_ec_group.h"

#else /* no AVX2 here: cpu() is 0, so no other entry is ever called */

static int no_cpu(void) { return 0; }
const spn_ec_core spn_ec_avx2 = {"avx2", 4, no_cpu, no_cpu, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 26, 10};

#endif
