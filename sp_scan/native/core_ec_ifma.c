/* The 8-lane AVX-512 IFMA engine core: core_ec_group.h over core_lanes_ifma.h (x86-64 only). */
#include "core_ec.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define SPN_EC_CORE spn_ec_ifma
#define SPN_EC_LABEL "ifma"
#define SPN_EC_CPU spn_has_ifma
#include "core_lanes_ifma.h"
#include "core_ec_group.h"

#else /* no AVX-512 here: cpu() is 0, so no other entry is ever called */

static int no_cpu(void) { return 0; }
const spn_ec_core spn_ec_ifma = {"ifma", 8, no_cpu, no_cpu, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 52, 5};

#endif
