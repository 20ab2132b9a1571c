/* The engine cores of core_ec.h as the scan's spn_engines, and the choice among the engines.
 *
 * The glue is here: points cross as secp256k1_pubkey, whose data the cores read as x, y little-endian
 * (checked against the bound libsecp256k1 before a core can be picked), and the scanner's recoded
 * scan key. A vector core handed fewer items than MIN_VECTOR (public) passes them to the scalar core:
 * a lone tx does not pay for a vector of idle lanes. */
#include "core.h"

#include <stdio.h>

enum { MIN_VECTOR = 2 };

static unsigned char (*as_pt64(secp256k1_pubkey *p))[64] { return (unsigned char(*)[64])p->data; }
static const unsigned char (*as_cpt64(const secp256k1_pubkey *p))[64] { return (const unsigned char(*)[64])p->data; }

/* The core for n items: the scalar one below MIN_VECTOR. */
static const spn_ec_core *sized(const spn_ec_core *c, size_t n) {
    return c->lanes > 1 && n < MIN_VECTOR ? &spn_ec_scalar : c;
}

static int lanes_parse(const spn_ec_core *c, const unsigned char *in, size_t width, size_t n,
                       secp256k1_pubkey *points, size_t *bad) {
    unsigned char valid[SPN_GROUP];
    if (width != 33 && width != 64) {
        *bad = 0;
        return n == 0;
    }
    for (size_t base = 0; base < n; base += SPN_GROUP) {
        size_t cnt = n - base < SPN_GROUP ? n - base : SPN_GROUP;
        sized(c, cnt)->parse_points(in + base * width, width, cnt, as_pt64(points + base), valid);
        for (size_t i = 0; i < cnt; i++)
            if (!valid[i]) {
                *bad = base + i;
                return 0;
            }
    }
    return 1;
}

static void lanes_shared(const spn_ec_core *c, const spn_scanner *sc, const secp256k1_pubkey *points,
                         const unsigned char (*scalar32)[32], size_t n, unsigned char (*ecdh33)[33]) {
    sized(c, n)->shared_secrets(&sc->scan_key_glv, sc->scan_key_words, as_cpt64(points), scalar32, n, ecdh33, NULL);
}

static void lanes_spend(const spn_ec_core *c, const spn_scanner *sc, const unsigned char (*t_k32)[32], size_t n,
                        secp256k1_pubkey *p_k, unsigned char (*p33)[33]) {
    sized(c, n)->spend_points(sc->spend.data, t_k32, n, as_pt64(p_k), p33);
}

static void lanes_label_sums(const spn_ec_core *c, const spn_scanner *sc, const secp256k1_pubkey *p_k, size_t n,
                             unsigned char (*sums33)[33]) {
    sized(c, n * sc->n_labels)->label_sums(as_cpt64(p_k), n, as_cpt64(sc->label_point), sc->n_labels, sums33);
}

/* input_hash·A is public: every core runs its variable-time ladder (ecmult_odd on public digits). One lane of the
 * scalar core beats libsecp256k1's ec_pubkey_tweak_mul since its field is four 64-bit words. */
static void lanes_tweaks(const spn_ec_core *c, const secp256k1_pubkey *sums, const unsigned char (*input_hash32)[32],
                         size_t n, secp256k1_pubkey *tweak, unsigned char (*tweak33)[33]) {
    sized(c, n)->tweaks(as_cpt64(sums), input_hash32, n, tweak33, as_pt64(tweak));
}

static int lanes_key_sums(const spn_ec_core *c, const unsigned char (*keys33)[33], const size_t *first, size_t n,
                          secp256k1_pubkey *sums, unsigned char *found) {
    sized(c, n)->key_sums(keys33, first, n, as_pt64(sums), found);
    return 1;
}

/* spn_engine_<id>, named label: the spn_engine of core `core`. */
#define SPN_LANE_ENGINE(id, label, core)                                                                            \
    static int id##_parse(const unsigned char *in, size_t width, size_t n, secp256k1_pubkey *points, size_t *bad) { \
        return lanes_parse(&core, in, width, n, points, bad);                                                  \
    }                                                                                                          \
    static void id##_shared(const spn_scanner *sc, const secp256k1_pubkey *points,                             \
                            const unsigned char (*scalar32)[32], size_t n, unsigned char (*ecdh33)[33]) {      \
        lanes_shared(&core, sc, points, scalar32, n, ecdh33);                                                  \
    }                                                                                                          \
    static void id##_spend(const spn_scanner *sc, const unsigned char (*t_k32)[32], size_t n,                  \
                           secp256k1_pubkey *p_k, unsigned char (*p33)[33]) {                                  \
        lanes_spend(&core, sc, t_k32, n, p_k, p33);                                                            \
    }                                                                                                          \
    static void id##_label_sums(const spn_scanner *sc, const secp256k1_pubkey *p_k, size_t n,                  \
                                unsigned char (*sums33)[33]) {                                                 \
        lanes_label_sums(&core, sc, p_k, n, sums33);                                                           \
    }                                                                                                          \
    static void id##_tweaks(const secp256k1_pubkey *sums, const unsigned char (*input_hash32)[32], size_t n,   \
                            secp256k1_pubkey *tweak, unsigned char (*tweak33)[33]) {                           \
        lanes_tweaks(&core, sums, input_hash32, n, tweak, tweak33);                                            \
    }                                                                                                          \
    static int id##_key_sums(const unsigned char (*keys33)[33], const size_t *first, size_t n,                 \
                             secp256k1_pubkey *sums, unsigned char *found) {                                   \
        return lanes_key_sums(&core, keys33, first, n, sums, found);                                           \
    }                                                                                                          \
    const spn_engine spn_engine_##id = {label,          id##_parse,  id##_shared,  id##_spend,                 \
                                        id##_label_sums, id##_tweaks, id##_key_sums};

SPN_LANE_ENGINE(ifma, "ifma", spn_ec_ifma)
SPN_LANE_ENGINE(avx2, "avx2", spn_ec_avx2)
SPN_LANE_ENGINE(scalar, "scalar", spn_ec_scalar)
#ifdef SPN_TESTING
SPN_LANE_ENGINE(ifma_emu, "ifma-emu", spn_ec_ifma_emu)
SPN_LANE_ENGINE(avx2_emu, "avx2-emu", spn_ec_avx2_emu)
#endif

/* ---- the choice ---- */

/* The engines by preference; core NULL: the libsecp256k1 engine. A NULL engine is a slot for one not
 * built into this extension yet. */
static const struct {
    const char *name;
    const spn_engine *engine;
    const spn_ec_core *core;
    const char *needs; /* what the CPU must have, for the refusal message */
} ENGINES[] = {
    {"ifma", &spn_engine_ifma, &spn_ec_ifma, "AVX-512 F/DQ/BW/VL/IFMA with the zmm state saved by the OS"},
    {"avx2", &spn_engine_avx2, &spn_ec_avx2, "AVX2 and BMI2 with the ymm state saved by the OS"},
    {"scalar", &spn_engine_scalar, &spn_ec_scalar, ""},
    {"libsecp256k1", &spn_engine_secp, NULL, ""},
#ifdef SPN_TESTING
    {"ifma-emu", &spn_engine_ifma_emu, &spn_ec_ifma_emu, ""},
    {"avx2-emu", &spn_engine_avx2_emu, &spn_ec_avx2_emu, ""},
#endif
};
enum { N_ENGINES = sizeof ENGINES / sizeof *ENGINES, N_AUTO = 3 /* ifma, avx2, scalar */ };

/* secp256k1_pubkey holds x, y little-endian: the cores read and write it in place. */
static int layout_ok(void) {
    static const unsigned char g33[33] = {0x02, 0x79, 0xBE, 0x66, 0x7E, 0xF9, 0xDC, 0xBB, 0xAC, 0x55, 0xA0, 0x62,
                                          0x95, 0xCE, 0x87, 0x0B, 0x07, 0x02, 0x9B, 0xFC, 0xDB, 0x2D, 0xCE, 0x28,
                                          0xD9, 0x59, 0xF2, 0x81, 0x5B, 0x16, 0xF8, 0x17, 0x98};
    static const unsigned char gy_be[32] = {0x48, 0x3A, 0xDA, 0x77, 0x26, 0xA3, 0xC4, 0x65, 0x5D, 0xA4, 0xFB,
                                            0xFC, 0x0E, 0x11, 0x08, 0xA8, 0xFD, 0x17, 0xB4, 0x48, 0xA6, 0x85,
                                            0x54, 0x19, 0x9C, 0x47, 0xD0, 0x8F, 0xFB, 0x10, 0xD4, 0xB8};
    secp256k1_pubkey g;
    if (!spn_ecc_start() || !spn_parse33(spn_ctx.public, &g, g33)) return 0;
    for (int i = 0; i < 32; i++)
        if (g.data[i] != g33[32 - i] || g.data[32 + i] != gy_be[31 - i]) return 0;
    return 1;
}

/* 1 when entry i can run here (starting its core and the scalar one), else 0 with the reason. */
static int usable(int i, char *why, size_t why_len) {
    const spn_ec_core *c = ENGINES[i].core;
    if (ENGINES[i].engine == NULL) {
        snprintf(why, why_len, "the %s EC engine is not built into this sp-scan", ENGINES[i].name);
        return 0;
    }
    if (c == NULL) return 1;
    if (!c->cpu()) {
        snprintf(why, why_len, "this CPU cannot run the %s EC engine (it needs %s)", ENGINES[i].name, ENGINES[i].needs);
        return 0;
    }
    if (!layout_ok() || !c->start() || !spn_ec_scalar.start()) {
        snprintf(why, why_len, "the %s EC engine cannot start (libsecp256k1's point layout is not the expected one)",
                 ENGINES[i].name);
        return 0;
    }
    return 1;
}

int spn_engine_select(const char *name, char *why, size_t why_len) {
    for (int i = 0; i < N_ENGINES; i++) {
        if (*name == 0 ? i >= N_AUTO : strcmp(name, ENGINES[i].name) != 0) continue;
        if (usable(i, why, why_len)) {
            spn_engine_active = ENGINES[i].engine;
            return 1;
        }
        if (*name != 0) return 0;
    }
    if (*name == 0) snprintf(why, why_len, "no EC engine can run here");
    else snprintf(why, why_len, "unknown EC engine '%s'", name);
    return 0;
}
