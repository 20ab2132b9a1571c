/* Test-only (sp_scan.native._testcore): the AVX2 engine core's source over the portable emulation of
 * its 4 lanes and of vpmuludq (core_lanes_c.h with SPN_EMULATE_AVX2), so the AVX2 core's field, group
 * and differential tests run on every CPU. Never part of the extension users load. */
#include "core_ec.h"

static int any_cpu(void) { return 1; }

#define SPN_LANES 4
#define SPN_EMULATE_AVX2
#define SPN_EC_CORE spn_ec_avx2_emu
#define SPN_EC_LABEL "avx2-emu"
#define SPN_EC_CPU any_cpu
#include "core_lanes_c.h"
#include "core_ec_group.h"
