/* The engines' test hooks, compiled only into the test-only extension sp_scan.native._testcore
 * (core_module.c includes this file when SPN_TESTING is defined; users load _core, which has none of
 * it). Python reaches them through sp_scan/native/_testing.py only. Blobs in, blobs out; a core is
 * named as in spn_ec_core.name and must be runnable on this CPU. */
#include <time.h>

#include "core_ec.h"

/* Every lane core built in, vector ones and their emulations alike. */
static const spn_ec_core *const CORES[] = {&spn_ec_ifma, &spn_ec_avx2, &spn_ec_scalar, &spn_ec_ifma_emu, &spn_ec_avx2_emu};
enum { N_CORES = sizeof CORES / sizeof *CORES };

/* The started core called `name`, or NULL with an exception set. */
static const spn_ec_core *core_named(PyObject *name) {
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s == NULL) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_TypeError, "core name must be a str"), NULL);
    for (int i = 0; i < N_CORES; i++) {
        if (strcmp(CORES[i]->name, s) != 0) continue;
        if (!CORES[i]->cpu() || !CORES[i]->start()) {
            PyErr_Format(PyExc_RuntimeError, "this CPU cannot run the %s core", s);
            return NULL;
        }
        return CORES[i];
    }
    PyErr_Format(PyExc_ValueError, "unknown core %R", name);
    return NULL;
}

/* cores() -> [(name, lanes, runnable here, raw limb bits, raw limbs)] */
static PyObject *py_cores(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *out = PyList_New(N_CORES);
    for (int i = 0; out && i < N_CORES; i++) {
        const spn_ec_core *c = CORES[i];
        PyObject *t = Py_BuildValue("(siNii)", c->name, c->lanes, PyBool_FromLong(c->cpu()), c->raw_bits, c->raw_limbs);
        if (t == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* set_ec_engine(name) -> the previous engine's name: every scan of this module uses `name`. */
static PyObject *py_set_ec_engine(PyObject *self, PyObject *arg) {
    (void)self;
    char why[200];
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (name == NULL) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "engine name must be a str");
    if (!spn_py_ready()) return NULL;
    PyObject *previous = PyUnicode_FromString(spn_engine_active->name);
    if (previous && !spn_engine_select(name, why, sizeof why)) {
        Py_DECREF(previous);
        PyErr_SetString(PyExc_ValueError, why);
        return NULL;
    }
    return previous;
}

/* fe_test(core, op, a, b) -> n × 32 bytes: op on raw limbs (n × raw_limbs little-endian uint64 each). */
static PyObject *py_fe_test(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *res = NULL;
    int op;
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "Oiy*y*:fe_test", &name, &op, &a, &b)) return NULL;
    const spn_ec_core *c = core_named(name);
    size_t width = c ? 8 * (size_t)c->raw_limbs : 1, n = (size_t)a.len / width;
    if (c == NULL) goto done;
    if (a.len != b.len || a.len % width || n == 0 || op < SPN_FE_MUL || op > SPN_FE_SQR8) {
        PyErr_SetString(PyExc_ValueError, "op, and a and b of n raw elements each");
        goto done;
    }
    uint64_t *la = malloc(a.len), *lb = malloc(b.len);
    unsigned char(*out)[32] = malloc(n * 32);
    if (la && lb && out) {
        memcpy(la, a.buf, a.len);
        memcpy(lb, b.buf, b.len);
        c->fe_test(op, la, lb, n, out);
        res = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(n * 32));
    } else {
        PyErr_NoMemory();
    }
    free(la);
    free(lb);
    free(out);
done:
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return res;
}

/* ge_test(core, op, p96s, q64s) -> (n × 64 bytes, n flags): op on n points X ‖ Y ‖ Z and n affine x ‖ y. */
static PyObject *py_ge_test(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *res = NULL;
    int op;
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "Oiy*y*:ge_test", &name, &op, &a, &b)) return NULL;
    const spn_ec_core *c = core_named(name);
    size_t n = (size_t)a.len / 96;
    if (c == NULL) goto done;
    if (a.len % 96 || b.len != (Py_ssize_t)(64 * n) || n == 0 || op < SPN_GE_MADD_CT || op > SPN_GE_MADD) {
        PyErr_SetString(PyExc_ValueError, "op, n points of 96 bytes and n of 64");
        goto done;
    }
    unsigned char(*out)[64] = malloc(n * 64), *inf = malloc(n);
    if (out && inf) {
        c->ge_test(op, (const unsigned char(*)[96])a.buf, (const unsigned char(*)[64])b.buf, n, out, inf);
        res = Py_BuildValue("y#y#", (const char *)out, (Py_ssize_t)(n * 64), (const char *)inf, (Py_ssize_t)n);
    } else {
        PyErr_NoMemory();
    }
    free(out);
    free(inf);
done:
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return res;
}

/* parse(core, points, width) -> (pt64 blob, valid bytes) */
static PyObject *py_parse(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *res = NULL;
    Py_buffer in;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "Oy*n:parse", &name, &in, &width)) return NULL;
    const spn_ec_core *c = core_named(name);
    if (c == NULL) goto done;
    if ((width != 33 && width != 64) || in.len % width) {
        PyErr_SetString(PyExc_ValueError, "points must be n x 33 or n x 64 bytes");
        goto done;
    }
    size_t n = (size_t)(in.len / width);
    unsigned char(*pt)[64] = malloc((n ? n : 1) * 64), *valid = malloc(n ? n : 1);
    if (pt && valid) {
        c->parse_points(in.buf, (size_t)width, n, pt, valid);
        res = Py_BuildValue("(y#y#)", (const char *)pt, (Py_ssize_t)(n * 64), (const char *)valid, (Py_ssize_t)n);
    } else {
        PyErr_NoMemory();
    }
    free(pt);
    free(valid);
done:
    PyBuffer_Release(&in);
    return res;
}

/* shared_secrets(core, scan_key32, pt64 blob, scalars blob | None) -> n x 33 blob */
static PyObject *py_shared_secrets(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *scalars, *res = NULL;
    Py_buffer key, pts;
    if (!PyArg_ParseTuple(args, "Oy*y*O:shared_secrets", &name, &key, &pts, &scalars)) return NULL;
    const unsigned char *sc = NULL;
    size_t sc_len = 0, n = (size_t)pts.len / 64;
    const spn_ec_core *c = core_named(name);
    if (c == NULL) goto done;
    if (key.len != 32 || pts.len % 64 || (scalars != Py_None && (!spn_py_as_bytes(scalars, &sc, &sc_len) || sc_len != n * 32))) {
        PyErr_SetString(PyExc_ValueError, "scan_key32, n x 64 points and n x 32 scalars (or None)");
        goto done;
    }
    unsigned char(*out)[33] = malloc((n ? n : 1) * 33);
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t b[4];
    spn_glv glv;
    spn_scalar_from_b32(b, key.buf);
    spn_glv_recode(&glv, b);
    c->shared_secrets(&glv, b, (const unsigned char(*)[64])pts.buf, (const unsigned char(*)[32])sc, n, out, NULL);
    res = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(n * 33));
    spn_cleanse(b, sizeof b);
    spn_cleanse(&glv, sizeof glv);
    spn_cleanse(out, (n ? n : 1) * 33);
    free(out);
done:
    PyBuffer_Release(&key);
    PyBuffer_Release(&pts);
    return res;
}

/* spend_points(core, spend64, t blob) -> (p33 blob, pk64 blob) */
static PyObject *py_spend_points(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *res = NULL;
    Py_buffer spend, ts;
    if (!PyArg_ParseTuple(args, "Oy*y*:spend_points", &name, &spend, &ts)) return NULL;
    size_t n = (size_t)ts.len / 32;
    const spn_ec_core *c = core_named(name);
    if (c == NULL) goto done;
    if (spend.len != 64 || ts.len % 32) {
        PyErr_SetString(PyExc_ValueError, "spend64 and n x 32 scalars");
        goto done;
    }
    unsigned char(*p33)[33] = malloc((n ? n : 1) * 33), (*pk)[64] = malloc((n ? n : 1) * 64);
    if (p33 && pk) {
        c->spend_points(spend.buf, (const unsigned char(*)[32])ts.buf, n, pk, p33);
        res = Py_BuildValue("(y#y#)", (const char *)p33, (Py_ssize_t)(n * 33), (const char *)pk, (Py_ssize_t)(n * 64));
    } else {
        PyErr_NoMemory();
    }
    free(p33);
    free(pk);
done:
    PyBuffer_Release(&spend);
    PyBuffer_Release(&ts);
    return res;
}

/* label_sums(core, pk64 blob, labels64 blob) -> n x L x 33 blob */
static PyObject *py_label_sums(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *res = NULL;
    Py_buffer pk, labels;
    if (!PyArg_ParseTuple(args, "Oy*y*:label_sums", &name, &pk, &labels)) return NULL;
    size_t n = (size_t)pk.len / 64, nl = (size_t)labels.len / 64;
    const spn_ec_core *c = core_named(name);
    if (c == NULL) goto done;
    if (pk.len % 64 || labels.len % 64) {
        PyErr_SetString(PyExc_ValueError, "n x 64 points and L x 64 labels");
        goto done;
    }
    unsigned char(*out)[33] = malloc((n * nl > 0 ? n * nl : 1) * 33);
    if (out) {
        c->label_sums((const unsigned char(*)[64])pk.buf, n, (const unsigned char(*)[64])labels.buf, nl, out);
        res = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(n * nl * 33));
    } else {
        PyErr_NoMemory();
    }
    free(out);
done:
    PyBuffer_Release(&pk);
    PyBuffer_Release(&labels);
    return res;
}

/* tweaks(core, pt64 blob, scalars blob) -> (tweak33 blob, pt64 blob): s_i·A_i on public data */
static PyObject *py_tweaks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *res = NULL;
    Py_buffer pts, sc;
    if (!PyArg_ParseTuple(args, "Oy*y*:tweaks", &name, &pts, &sc)) return NULL;
    size_t n = (size_t)pts.len / 64;
    const spn_ec_core *c = core_named(name);
    if (c == NULL) goto done;
    if (pts.len % 64 || (size_t)sc.len != 32 * n) {
        PyErr_SetString(PyExc_ValueError, "n x 64 points and n x 32 scalars");
        goto done;
    }
    unsigned char(*t33)[33] = malloc((n ? n : 1) * 33), (*t64)[64] = malloc((n ? n : 1) * 64);
    if (t33 && t64) {
        c->tweaks((const unsigned char(*)[64])pts.buf, (const unsigned char(*)[32])sc.buf, n, t33, t64);
        res = Py_BuildValue("(y#y#)", (const char *)t33, (Py_ssize_t)(n * 33), (const char *)t64, (Py_ssize_t)(n * 64));
    } else {
        PyErr_NoMemory();
    }
    free(t33);
    free(t64);
done:
    PyBuffer_Release(&pts);
    PyBuffer_Release(&sc);
    return res;
}

/* key_sums(core, keys33 blob, counts u32 blob) -> (sum64 blob, found bytes): set i is the next counts[i] keys */
static PyObject *py_key_sums(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *res = NULL;
    Py_buffer keys, counts;
    if (!PyArg_ParseTuple(args, "Oy*y*:key_sums", &name, &keys, &counts)) return NULL;
    size_t n = (size_t)counts.len / 4, total = 0;
    const spn_ec_core *c = core_named(name);
    if (c == NULL) goto done;
    size_t *first = malloc((n + 1) * sizeof *first);
    if (first == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k;
        memcpy(&k, (const unsigned char *)counts.buf + 4 * i, 4);
        first[i] = total;
        total += k;
    }
    first[n] = total;
    if (counts.len % 4 || (size_t)keys.len != 33 * total) {
        PyErr_SetString(PyExc_ValueError, "n u32 counts and their total x 33-byte keys");
        free(first);
        goto done;
    }
    unsigned char(*sum)[64] = malloc((n ? n : 1) * 64), *found = malloc(n ? n : 1);
    if (sum && found) {
        c->key_sums((const unsigned char(*)[33])keys.buf, first, n, sum, found);
        res = Py_BuildValue("(y#y#)", (const char *)sum, (Py_ssize_t)(n * 64), (const char *)found, (Py_ssize_t)n);
    } else {
        PyErr_NoMemory();
    }
    free(sum);
    free(found);
    free(first);
done:
    PyBuffer_Release(&keys);
    PyBuffer_Release(&counts);
    return res;
}

/* ---- timing (dudect-style checks) ---- */

enum {
    TIME_ECDH = 0,    /* input: 32-byte scan key; its recoding and b·T_i for the 8 points */
    TIME_SPEND = 1,   /* input: 8 × 32-byte t_i; pt64[0] + t_i·G */
    TIME_CONTROL = 2, /* input: 32-byte x; the variable-time Jacobi symbol (must show a leak) */
    TIME_LANES = 3,   /* input: 8 × 32-byte k_i; k_i·T_i (per-lane recoding, as a block scan) */
};

/* A fenced cycle (or tick) counter: the TSC on x86-64, the virtual counter on AArch64, else ns. */
static uint64_t ticks(void) {
#if defined(__x86_64__)
    unsigned lo, hi, aux;
    __asm__ __volatile__("lfence\n\trdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux) : : "memory");
    return ((uint64_t)hi << 32) | lo;
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(v) : : "memory");
    return v;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static void put_u64(uint64_t *out, size_t i, uint64_t v) { out[i] = v; }

static void time_op(const spn_ec_core *c, int op, const unsigned char *in, size_t n, const unsigned char (*pt64)[64],
                    uint64_t *cycles) {
    unsigned char out33[8][33], pk[8][64];
    uint64_t b[4];
    spn_glv glv;
    static const uint64_t one[4] = {1, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        const unsigned char *x = in + i * (op == TIME_SPEND || op == TIME_LANES ? 256 : 32);
        uint64_t t0 = ticks();
        if (op == TIME_ECDH) { /* the scan key's recoding, then b·T on 8 points */
            spn_scalar_from_b32(b, x);
            spn_glv_recode(&glv, b);
            c->shared_secrets(&glv, b, pt64, NULL, 8, out33, NULL);
        } else if (op == TIME_LANES) { /* k_i·T_i with a secret k_i per point (block scans) */
            c->shared_secrets(NULL, one, pt64, (const unsigned char(*)[32])x, 8, out33, NULL);
        } else if (op == TIME_SPEND) { /* B + t_i·G on 8 points */
            c->spend_points(pt64[0], (const unsigned char(*)[32])x, 8, pk, out33);
        } else { /* the variable-time control: a Jacobi symbol */
            out33[0][0] = (unsigned char)spn_is_x_var(x);
        }
        put_u64(cycles, i, ticks() - t0);
    }
    spn_cleanse(b, sizeof b);
    spn_cleanse(&glv, sizeof glv);
    spn_cleanse(out33, sizeof out33);
    spn_cleanse(pk, sizeof pk);
}

/* time(core, op, inputs, points64) -> n uint64 tick counts, little-endian (constant-time tests) */
static PyObject *py_time(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name, *res = NULL;
    int op;
    Py_buffer in, pts;
    if (!PyArg_ParseTuple(args, "Oiy*y*:time", &name, &op, &in, &pts)) return NULL;
    size_t width = op == TIME_SPEND || op == TIME_LANES ? 256 : 32;
    const spn_ec_core *c = core_named(name);
    if (c == NULL) goto done;
    if (op < TIME_ECDH || op > TIME_LANES || in.len % width || pts.len != 8 * 64) {
        PyErr_SetString(PyExc_ValueError, "op, n inputs of its width and 8 x 64-byte points");
        goto done;
    }
    size_t n = (size_t)in.len / width;
    uint64_t *cycles = malloc((n ? n : 1) * sizeof *cycles);
    if (cycles == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    time_op(c, op, in.buf, n, (const unsigned char(*)[64])pts.buf, cycles);
    Py_END_ALLOW_THREADS
    res = PyBytes_FromStringAndSize((const char *)cycles, (Py_ssize_t)(n * sizeof *cycles));
    free(cycles);
done:
    PyBuffer_Release(&in);
    PyBuffer_Release(&pts);
    return res;
}

static PyMethodDef testing_methods[] = {
    {"cores", py_cores, METH_NOARGS, "cores() -> [(name, lanes, runnable, raw_bits, raw_limbs)] of every lane core built in."},
    {"set_ec_engine", py_set_ec_engine, METH_O, "set_ec_engine(name) -> the previous engine: every scan of this module uses `name`."},
    {"fe_test", py_fe_test, METH_VARARGS, "fe_test(core, op, a, b) -> n x 32 bytes."},
    {"ge_test", py_ge_test, METH_VARARGS, "ge_test(core, op, p96s, q64s) -> (n x 64 bytes, n flags)."},
    {"parse", py_parse, METH_VARARGS, "parse(core, points, width) -> (pt64 blob, valid)."},
    {"shared_secrets", py_shared_secrets, METH_VARARGS, "shared_secrets(core, scan_key32, pt64 blob, scalars | None) -> ecdh33 blob."},
    {"spend_points", py_spend_points, METH_VARARGS, "spend_points(core, spend64, t32 blob) -> (p33 blob, pk64 blob)."},
    {"label_sums", py_label_sums, METH_VARARGS, "label_sums(core, pk64 blob, labels64 blob) -> sums33 blob."},
    {"tweaks", py_tweaks, METH_VARARGS, "tweaks(core, pt64 blob, scalars32 blob) -> (tweak33 blob, pt64 blob)."},
    {"key_sums", py_key_sums, METH_VARARGS, "key_sums(core, keys33 blob, counts u32 blob) -> (sum64 blob, found)."},
    {"time", py_time, METH_VARARGS, "time(core, op, inputs, points64) -> tick counts."},
    {NULL, NULL, 0, NULL},
};
