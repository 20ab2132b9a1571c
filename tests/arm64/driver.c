/* The C-level differential's driver (tests/arm64/differential.py): the portable C of sp_scan/native
 * and the scalar engine core (core_ec.h), built alone (no Python, no libsecp256k1) for another
 * architecture and run under qemu-user. It reads
 * one request per line on stdin and writes one answer line per request on stdout; all values are
 * hex, big-endian, "-" for "no point"/"invalid" (and for an empty message). The first output line
 * names what runs:
 *     info sha <selected compression> core <engine core name> raw <bits> <limbs>
 *
 * Requests (the host computes every expected answer with libsecp256k1 or Python integers):
 *     smul A B              a·b mod n
 *     sadd A B              (a + b) mod n                     (a, b < n)
 *     sred X                x mod n
 *     glv K                 the GLV recoding of k < n: "n0n1 D0 D1", signs then 26 int8 digits each
 *     sha MSG               SHA256: "portable selected"
 *     tag T MSG             BIP352 tagged hash, tag 0/1/2: "portable selected"
 *     h160 MSG              RIPEMD160(SHA256(msg)): "portable selected"
 *     isx X                 1 / 0 / -1: x is / is not a curve x-coordinate / undecided (spn_is_x_var)
 *   the engine core's entry points (SPN_DRIVER_CORE, e.g. spn_ec_scalar), each a batch in one call:
 *     parse W P...          W = 33 or 64: per point x ‖ y (64 bytes) or "-"
 *     ecdh B T...           ser_P(b·T_i) (b recoded once, as a scan key)
 *     ecdhs B T... S...     ser_P(b·s_i·T_i) (per-lane scalars, as a block scan); n T then n S
 *     tweak A... H...       ser_P(h_i·A_i) ":" x ‖ y (input_hash·A: b = 1); n A then n H
 *     spend B T...          ser_P(B + t_i·G) ":" x ‖ y, or "-" (t = 0, t ≥ n, infinity)
 *     lsum N P... L...      ser_P(P_i + L_m) for i < N, m over the Ls, P-major, or "-" (infinity)
 *     fe OP A... B...       OP applied to raw field values (raw limbs, limb 0 first, 16 hex digits
 *                           each): the fully reduced result; n A then n B */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_ec.h"
#include "ripemd160.h"
#include "sha256.h"

#ifndef SPN_DRIVER_CORE
#error "define SPN_DRIVER_CORE as the engine core to drive (e.g. spn_ec_scalar)"
#endif

/* core_fe.c (core.h declares it beside libsecp256k1's bindings, which the driver leaves out). */
int spn_is_x_var(const unsigned char x32[32]);

enum { MAX_TOKENS = 1 << 16 };

static char *tok[MAX_TOKENS];
static size_t n_tok;

static void die(const char *what) {
    fprintf(stderr, "driver: %s\n", what);
    exit(2);
}

static void *alloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    if (p == NULL) die("out of memory");
    return p;
}

static int nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    die("bad hex digit");
    return 0;
}

/* Decode token t into out; its length must be exactly `len` bytes (any length when len is 0; "-" is
 * the empty message). */
static size_t unhex(const char *t, unsigned char *out, size_t len) {
    if (len == 0 && strcmp(t, "-") == 0) return 0;
    size_t n = strlen(t) / 2;
    if (strlen(t) % 2 || (len && n != len)) die("hex token of the wrong length");
    for (size_t i = 0; i < n; i++) out[i] = (unsigned char)(nibble(t[2 * i]) << 4 | nibble(t[2 * i + 1]));
    return n;
}

static void put_hex(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
}

static void words_to_b32(unsigned char b32[32], const uint64_t w[4]) {
    for (int i = 0; i < 32; i++) b32[i] = (unsigned char)(w[3 - i / 8] >> (56 - 8 * (i % 8)));
}

static void put_scalar(const uint64_t w[4]) {
    unsigned char b[32];
    words_to_b32(b, w);
    put_hex(b, 32);
}

/* ---- scalars mod n and hashes: portable code shared by every engine ---- */

static void op_scalar(const char *op) {
    unsigned char a[32], b[32], r[32];
    uint64_t wa[4], wb[4], wr[4];
    if (strcmp(op, "smul") == 0) {
        unhex(tok[1], a, 32);
        unhex(tok[2], b, 32);
        spn_scalar_from_b32(wa, a);
        spn_scalar_from_b32(wb, b);
        spn_scalar_mul(wr, wa, wb);
        put_scalar(wr);
    } else if (strcmp(op, "sadd") == 0) {
        unhex(tok[1], a, 32);
        unhex(tok[2], b, 32);
        spn_scalar_add(r, a, b);
        put_hex(r, 32);
    } else if (strcmp(op, "sred") == 0) {
        unhex(tok[1], a, 32);
        spn_scalar_reduce(r, a);
        put_hex(r, 32);
    } else { /* glv */
        spn_glv g;
        unhex(tok[1], a, 32);
        spn_scalar_from_b32(wa, a);
        spn_glv_recode(&g, wa);
        printf("%d%d", g.neg[0], g.neg[1]);
        for (int h = 0; h < 2; h++) {
            putchar(' ');
            for (int i = 0; i < SPN_GLV_WIN; i++) printf("%02x", (unsigned char)g.d[h][i]);
        }
    }
}

/* Hash op on msg with the portable compression, then with the selected one. */
static void op_hash(const char *op) {
    const char *hex = tok[strcmp(op, "tag") == 0 ? 2 : 1];
    unsigned char *msg = alloc(strlen(hex) / 2), out[32];
    size_t len = unhex(hex, msg, 0);
    for (int pass = 0; pass < 2; pass++) {
        spn_sha256_select(pass == 0);
        if (strcmp(op, "sha") == 0) {
            spn_sha256 h;
            spn_sha256_init(&h);
            spn_sha256_write(&h, msg, len);
            spn_sha256_finalize(&h, out);
            put_hex(out, 32);
        } else if (strcmp(op, "tag") == 0) {
            spn_tagged_sha256(atoi(tok[1]), msg, len, out);
            put_hex(out, 32);
        } else {
            if (len == 33) spn_hash160_33(msg, out);
            else spn_hash160(msg, len, out);
            put_hex(out, 20);
        }
        if (pass == 0) putchar(' ');
    }
    free(msg);
}

/* ---- the engine core ---- */

static const spn_ec_core *core = &SPN_DRIVER_CORE;

/* 64-byte little-endian x, y (a core's point) -> x ‖ y big-endian. */
static void put_point(const unsigned char pt64[64]) {
    unsigned char be[64];
    for (int i = 0; i < 32; i++) {
        be[i] = pt64[31 - i];
        be[32 + i] = pt64[63 - i];
    }
    put_hex(be, 64);
}

/* Parse tokens [first, first + n) as points of one width into a fresh array; every one must be valid. */
static unsigned char (*points(size_t first, size_t n))[64] {
    size_t width = strlen(tok[first]) / 2;
    unsigned char *in = alloc(n * width), *valid = alloc(n);
    unsigned char(*pt)[64] = alloc(n * 64);
    for (size_t i = 0; i < n; i++) unhex(tok[first + i], in + i * width, width);
    core->parse_points(in, width, n, pt, valid);
    for (size_t i = 0; i < n; i++)
        if (!valid[i]) die("a point the host meant as valid does not parse");
    free(in);
    free(valid);
    return pt;
}

static unsigned char (*scalars(size_t first, size_t n))[32] {
    unsigned char(*s)[32] = alloc(n * 32);
    for (size_t i = 0; i < n; i++) unhex(tok[first + i], s[i], 32);
    return s;
}

static void put_ser(const unsigned char ser33[33], const unsigned char *pt64) {
    if (ser33[0] == 0) {
        putchar('-');
        return;
    }
    put_hex(ser33, 33);
    if (pt64) {
        putchar(':');
        put_point(pt64);
    }
}

static void op_core(const char *op) {
    if (strcmp(op, "parse") == 0) {
        size_t width = (size_t)atoi(tok[1]), n = n_tok - 2;
        unsigned char *in = alloc(n * width), *valid = alloc(n);
        unsigned char(*pt)[64] = alloc(n * 64);
        for (size_t i = 0; i < n; i++) unhex(tok[2 + i], in + i * width, width);
        core->parse_points(in, width, n, pt, valid);
        for (size_t i = 0; i < n; i++) {
            if (i) putchar(' ');
            if (valid[i]) put_point(pt[i]);
            else putchar('-');
        }
        free(in);
        free(valid);
        free(pt);
    } else if (strcmp(op, "ecdh") == 0 || strcmp(op, "ecdhs") == 0 || strcmp(op, "tweak") == 0) {
        int per_lane = strcmp(op, "ecdh") != 0, tweak = strcmp(op, "tweak") == 0;
        size_t first = tweak ? 1 : 2, n = per_lane ? (n_tok - first) / 2 : n_tok - first;
        unsigned char b32[32] = {0};
        uint64_t b[4];
        spn_glv glv;
        if (tweak) b32[31] = 1;
        else unhex(tok[1], b32, 32);
        spn_scalar_from_b32(b, b32);
        spn_glv_recode(&glv, b);
        unsigned char(*pt)[64] = points(first, n), (*s)[32] = per_lane ? scalars(first + n, n) : NULL;
        unsigned char(*ecdh)[33] = alloc(n * 33), (*out)[64] = alloc(n * 64);
        core->shared_secrets(per_lane ? NULL : &glv, b, (const unsigned char(*)[64])pt, (const unsigned char(*)[32])s, n,
                             ecdh, tweak ? out : NULL);
        for (size_t i = 0; i < n; i++) {
            if (i) putchar(' ');
            put_ser(ecdh[i], tweak ? out[i] : NULL);
        }
        free(pt);
        free(s);
        free(ecdh);
        free(out);
    } else if (strcmp(op, "spend") == 0) {
        size_t n = n_tok - 2;
        unsigned char(*spend)[64] = points(1, 1), (*t)[32] = scalars(2, n);
        unsigned char(*pk)[64] = alloc(n * 64), (*p33)[33] = alloc(n * 33);
        core->spend_points(spend[0], (const unsigned char(*)[32])t, n, pk, p33);
        for (size_t i = 0; i < n; i++) {
            if (i) putchar(' ');
            put_ser(p33[i], pk[i]);
        }
        free(spend);
        free(t);
        free(pk);
        free(p33);
    } else if (strcmp(op, "lsum") == 0) {
        size_t n = (size_t)atoi(tok[1]), m = n_tok - 2 - n;
        unsigned char(*p)[64] = points(2, n), (*l)[64] = points(2 + n, m);
        unsigned char(*sums)[33] = alloc(n * m * 33);
        core->label_sums((const unsigned char(*)[64])p, n, (const unsigned char(*)[64])l, m, sums);
        for (size_t i = 0; i < n * m; i++) {
            if (i) putchar(' ');
            put_ser(sums[i], NULL);
        }
        free(p);
        free(l);
        free(sums);
    } else if (strcmp(op, "fe") == 0) {
        size_t limbs = (size_t)core->raw_limbs, n = (n_tok - 2) / 2;
        uint64_t *a = alloc(n * limbs * 8), *b = alloc(n * limbs * 8);
        unsigned char(*out)[32] = alloc(n * 32);
        for (size_t i = 0; i < 2 * n; i++) {
            unsigned char raw[8 * 16];
            if (unhex(tok[2 + i], raw, 0) != 8 * limbs) die("fe: wrong limb count");
            for (size_t j = 0; j < limbs; j++) {
                uint64_t w = 0;
                for (int k = 0; k < 8; k++) w = w << 8 | raw[8 * j + (size_t)k];
                (i < n ? a : b)[(i % n) * limbs + j] = w;
            }
        }
        core->fe_test(atoi(tok[1]), a, b, n, out);
        for (size_t i = 0; i < n; i++) {
            if (i) putchar(' ');
            put_hex(out[i], 32);
        }
        free(a);
        free(b);
        free(out);
    } else {
        die("unknown request");
    }
}

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    spn_sha256_select(0);
    if (!core->cpu() || !core->start()) die("the engine core cannot run here");
    printf("info sha %s core %s raw %d %d\n", spn_sha256_impl(), core->name, core->raw_bits, core->raw_limbs);
    while (getline(&line, &cap, stdin) > 0) {
        n_tok = 0;
        for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n")) {
            if (n_tok == MAX_TOKENS) die("too many tokens");
            tok[n_tok++] = t;
        }
        if (n_tok == 0) continue;
        const char *op = tok[0];
        if (strcmp(op, "smul") == 0 || strcmp(op, "sadd") == 0 || strcmp(op, "sred") == 0 || strcmp(op, "glv") == 0) {
            op_scalar(op);
        } else if (strcmp(op, "sha") == 0 || strcmp(op, "tag") == 0 || strcmp(op, "h160") == 0) {
            op_hash(op);
        } else if (strcmp(op, "isx") == 0) {
            unsigned char x[32];
            unhex(tok[1], x, 32);
            printf("%d", spn_is_x_var(x));
        } else {
            op_core(op);
        }
        putchar('\n');
    }
    free(line);
    return ferror(stdout) ? 1 : 0;
}
