/* Test-only (sp_scan.native._testcore): the IFMA engine core's source over the portable emulation of
 * its 8 lanes and of vpmadd52luq/huq (core_lanes_c.h with SPN_EMULATE_IFMA), so the IFMA core's
 * field, group and differential tests run on every CPU. Never part of the extension users load. */
#include "core_ec.h"

static int any_cpu(void) { return 1; }

#define SPN_LANES 8
#define SPN_EMULATE_IFMA
#define SPN_EC_CORE spn_ec_ifma_emu
#define SPN_EC_LABEL "ifma-emu"
#define SPN_EC_CPU any_cpu
#include "core_lanes_c.h"
#include "core_ec_group.h"
