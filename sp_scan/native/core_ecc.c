/* The ECC context object: two libsecp256k1 contexts per process, plus point helpers. */
#include "core.h"

#include <stdatomic.h>
#include <sys/random.h>

spn_secp_api spn_secp;
spn_ecc spn_ctx;
static atomic_int in_flight;

void spn_ecc_enter(void) { atomic_fetch_add(&in_flight, 1); }
void spn_ecc_leave(void) { atomic_fetch_sub(&in_flight, 1); }

/* Caller bugs reported by libsecp256k1 make the call return 0; the default would abort(). */
static void ignore_illegal(const char *message, void *data) {
    (void)message;
    (void)data;
}

static int random_seed(unsigned char seed32[32]) {
    size_t got = 0;
    while (got < 32) {
        ssize_t r = getrandom(seed32 + got, 32 - got, 0);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

static secp256k1_context *make_context(void) {
    unsigned char seed32[32];
    secp256k1_context *ctx = spn_secp.context_create(SPN_SECP_CONTEXT_NONE);
    if (ctx == NULL) return NULL;
    spn_secp.context_set_illegal_callback(ctx, ignore_illegal, NULL);
    if (!random_seed(seed32) || !spn_secp.context_randomize(ctx, seed32)) {
        spn_cleanse(seed32, sizeof seed32);
        spn_secp.context_destroy(ctx);
        return NULL;
    }
    spn_cleanse(seed32, sizeof seed32);
    return ctx;
}

int spn_ecc_start(void) {
    if (spn_ctx.secret != NULL) return 1;
    secp256k1_context *pub = make_context();
    secp256k1_context *sec = pub ? make_context() : NULL;
    if (sec == NULL) {
        if (pub) spn_secp.context_destroy(pub);
        return 0;
    }
    spn_ctx.public = pub;
    spn_ctx.secret = sec; /* set last: it is the "started" flag */
    return 1;
}

void spn_ecc_stop(void) {
    if (spn_ctx.secret == NULL || atomic_load(&in_flight) != 0) return;
    spn_secp.context_destroy(spn_ctx.secret);
    spn_secp.context_destroy(spn_ctx.public);
    spn_ctx.secret = spn_ctx.public = NULL;
}

int spn_ecdh_point33(unsigned char *out33, const unsigned char *x32, const unsigned char *y32, void *data) {
    (void)data;
    out33[0] = (unsigned char)(0x02 | (y32[31] & 1));
    memcpy(out33 + 1, x32, 32);
    return 1;
}

void spn_ser33(const secp256k1_context *ctx, unsigned char out33[33], const secp256k1_pubkey *p) {
    size_t len = 33;
    spn_secp.ec_pubkey_serialize(ctx, out33, &len, p, SPN_SECP_EC_COMPRESSED);
}

int spn_parse33(const secp256k1_context *ctx, secp256k1_pubkey *p, const unsigned char in33[33]) {
    if (in33[0] != 0x02 && in33[0] != 0x03) return 0;
    return spn_secp.ec_pubkey_parse(ctx, p, in33, 33);
}

int spn_lift_x(const secp256k1_context *ctx, secp256k1_pubkey *p, const unsigned char x32[32]) {
    unsigned char ser[33];
    ser[0] = 0x02;
    memcpy(ser + 1, x32, 32);
    return spn_secp.ec_pubkey_parse(ctx, p, ser, 33);
}

int spn_ecdh33(const secp256k1_context *ctx, unsigned char ecdh33[33], const secp256k1_pubkey *point,
               const unsigned char scalar32[32]) {
    return spn_secp.ecdh(ctx, ecdh33, point, scalar32, spn_ecdh_point33, NULL);
}
