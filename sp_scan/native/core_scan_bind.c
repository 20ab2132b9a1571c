/* Python bindings of scanning (core_scan.c): the Scanner type and the per-tx and batch scans. */
#include "core_bind.h"

#include <stdlib.h>

static void Scanner_dealloc(ScannerObject *self) {
    if (self->live) spn_scanner_free(&self->sc);
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *Scanner_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *scan_key, *spend, *labels, *seq = NULL;
    const unsigned char *scan32, *spend33;
    uint32_t *m = NULL;
    unsigned char(*label33)[33] = NULL, (*tweak32)[32] = NULL;
    ScannerObject *self = NULL;
    size_t n = 0;
    static char *kwlist[] = {"scan_key32", "spend_pubkey33", "labels", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO:Scanner", kwlist, &scan_key, &spend, &labels)) return NULL;
    if (!spn_py_ready() || !spn_py_fixed(scan_key, 32, &scan32, "scan_key32") ||
        !spn_py_fixed(spend, 33, &spend33, "spend_pubkey33"))
        return NULL;
    if (!(seq = PySequence_Fast(labels, "labels must be a sequence of (m, label33, tweak32)"))) return NULL;
    n = (size_t)PySequence_Fast_GET_SIZE(seq);
    m = malloc((n ? n : 1) * sizeof *m);
    label33 = malloc((n ? n : 1) * sizeof *label33);
    tweak32 = malloc((n ? n : 1) * sizeof *tweak32);
    if (!m || !label33 || !tweak32) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), *pm, *pl, *pt;
        const unsigned char *l, *t;
        unsigned long v;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "labels must be a sequence of (m, label33, tweak32)");
            goto done;
        }
        pm = PyTuple_GET_ITEM(item, 0), pl = PyTuple_GET_ITEM(item, 1), pt = PyTuple_GET_ITEM(item, 2);
        v = PyLong_AsUnsignedLong(pm);
        if (PyErr_Occurred() || v > 0xffffffffUL) {
            PyErr_Clear();
            PyErr_SetString(E_KEY, "label m must be an integer in [0, 2**32)");
            goto done;
        }
        if (!spn_py_fixed(pl, 33, &l, "label point") || !spn_py_fixed(pt, 32, &t, "label tweak")) goto done;
        m[i] = (uint32_t)v;
        memcpy(label33[i], l, 33);
        memcpy(tweak32[i], t, 32);
    }
    if (!(self = (ScannerObject *)type->tp_alloc(type, 0))) goto done;
    int r = spn_scanner_init(&self->sc, scan32, spend33, n, m, (const unsigned char(*)[33])label33,
                             (const unsigned char(*)[32])tweak32);
    if (r != 1) {
        Py_CLEAR(self);
        spn_py_raise_code(r, "invalid scan key, spend public key or label");
        goto done;
    }
    self->live = 1;
done:
    if (tweak32) spn_cleanse(tweak32, (n ? n : 1) * sizeof *tweak32);
    free(m);
    free(label33);
    free(tweak32);
    Py_XDECREF(seq);
    return (PyObject *)self;
}

/* close(): wipe and free the keys now rather than when the object is collected */
static PyObject *Scanner_close(ScannerObject *self, PyObject *unused) {
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the scanner is in use by a running scan");
        return NULL;
    }
    if (self->live) spn_scanner_free(&self->sc);
    self->live = 0;
    Py_RETURN_NONE;
}

static PyMethodDef scanner_methods[] = {
    {"close", (PyCFunction)Scanner_close, METH_NOARGS, "Wipe and free b_scan and the label tweaks; the scanner is unusable after."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot scanner_slots[] = {
    {Py_tp_new, Scanner_new},
    {Py_tp_dealloc, Scanner_dealloc},
    {Py_tp_methods, scanner_methods},
    {Py_tp_doc, "A receiver's keys parsed once: b_scan (wiped on free), B_spend, the label table."},
    {0, NULL},
};

static PyType_Spec scanner_spec = {"sp_scan.native._core.Scanner", sizeof(ScannerObject), 0, Py_TPFLAGS_DEFAULT,
                                   scanner_slots};
static PyTypeObject *ScannerType;

int spn_py_scanner_of(PyObject *o, const spn_scanner **sc) {
    if (!PyObject_TypeCheck(o, ScannerType)) {
        PyErr_SetString(PyExc_TypeError, "expected a Scanner");
        return 0;
    }
    if (!((ScannerObject *)o)->live) {
        PyErr_SetString(PyExc_ValueError, "the scanner was closed");
        return 0;
    }
    *sc = &((ScannerObject *)o)->sc;
    return 1;
}

typedef struct {
    PyObject *seq;
    const unsigned char **x;
    size_t n;
} outputs_t;

static int outputs_of(PyObject *obj, outputs_t *o) {
    memset(o, 0, sizeof *o);
    if (!(o->seq = PySequence_Fast(obj, "outputs32 must be a sequence of bytes"))) return 0;
    o->n = (size_t)PySequence_Fast_GET_SIZE(o->seq);
    if (!(o->x = malloc((o->n ? o->n : 1) * sizeof *o->x))) {
        PyErr_NoMemory();
        return 0;
    }
    for (size_t i = 0; i < o->n; i++) {
        size_t len;
        if (!spn_py_as_bytes(PySequence_Fast_GET_ITEM(o->seq, (Py_ssize_t)i), &o->x[i], &len) || len != 32) {
            PyErr_SetString(E_KEY, "each output must be a 32-byte x-only key");
            return 0;
        }
    }
    return 1;
}

static void outputs_free(outputs_t *o) {
    Py_XDECREF(o->seq);
    free(o->x);
}

/* Scan a batch, without the GIL when `release`. Returns the found count, or -1 with an exception
 * set (SPN_EKEY: bad_format with the lowest bad tx index). *found: wiped and freed by the caller. */
static long run_batch(const spn_scanner *sc, const spn_batch *b, size_t threads, int release,
                      spn_batch_found **found, const char *bad_format) {
    size_t bad = 0;
    long n;
    if (release) {
        spn_ecc_enter();
        Py_BEGIN_ALLOW_THREADS
        n = spn_scan_batch(sc, b, threads, found, &bad);
        Py_END_ALLOW_THREADS
        spn_ecc_leave();
    } else {
        n = spn_scan_batch(sc, b, threads, found, &bad);
    }
    if (n == SPN_EKEY) PyErr_Format(E_KEY, bad_format, bad);
    else if (n < 0) spn_py_raise_code(n, "");
    return n < 0 ? -1 : n;
}

static void found_free(spn_batch_found *found, long n) {
    if (found) spn_cleanse(found, (size_t)(n > 0 ? n : 0) * sizeof *found);
    free(found);
}

static PyObject *label_of(int64_t label) {
    return label < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(label);
}

/* [(tx, index, tweak32, label | None)], or without the tx index when `with_tx` is 0. */
static PyObject *found_list(const spn_batch_found *found, long n, int with_tx) {
    PyObject *out = PyList_New(n);
    for (long i = 0; out && i < n; i++) {
        const spn_batch_found *f = &found[i];
        PyObject *label = label_of(f->label), *t = NULL;
        if (label && with_tx) t = Py_BuildValue("(nky#N)", (Py_ssize_t)f->tx, (unsigned long)f->index, f->tweak32, (Py_ssize_t)32, label);
        else if (label) t = Py_BuildValue("(ky#N)", (unsigned long)f->index, f->tweak32, (Py_ssize_t)32, label);
        if (!t) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* One tx's batch: its outputs, and either tweak33 or its summary. */
static PyObject *scan_one(const spn_scanner *sc, const unsigned char *tweak33, const spn_summary *s, const outputs_t *o) {
    size_t first[2] = {0, o->n};
    spn_batch b = {1, tweak33, 33, s ? &s->sum : NULL, s ? (const unsigned char(*)[32])s->input_hash32 : NULL, o->x, first};
    spn_batch_found *found = NULL;
    long n = run_batch(sc, &b, 1, 0, &found, "tweak33 is not a valid compressed point (tx %zu)");
    PyObject *out = n < 0 ? NULL : found_list(found, n, 0);
    found_free(found, n);
    return out;
}

/* scan_tx(scanner, inputs, outputs32) -> [(index, tweak32, label | None)] */
static PyObject *py_scan_tx(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const spn_scanner *sc;
    spn_py_inputs x = {0};
    outputs_t o = {0};
    spn_summary s;
    PyObject *out = NULL;
    int r;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "scan_tx takes 3 arguments");
    if (!spn_py_ready() || !spn_py_scanner_of(args[0], &sc) || !outputs_of(args[2], &o) || !spn_py_inputs_of(args[1], &x))
        goto done;
    r = spn_summarize(x.ins, x.n, &s);
    if (r == 1) out = scan_one(sc, NULL, &s, &o);
    else out = r < 0 ? spn_py_raise_code(r, "") : PyList_New(0);
done:
    spn_py_inputs_free(&x);
    outputs_free(&o);
    return out;
}

/* scan_tweak(scanner, tweak33, outputs32) -> [(index, tweak32, label | None)] */
static PyObject *py_scan_tweak(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const spn_scanner *sc;
    const unsigned char *t33;
    outputs_t o = {0};
    PyObject *out = NULL;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "scan_tweak takes 3 arguments");
    if (!spn_py_ready() || !spn_py_scanner_of(args[0], &sc) || !spn_py_fixed(args[1], 33, &t33, "tweak33")) return NULL;
    if (outputs_of(args[2], &o)) out = scan_one(sc, t33, NULL, &o);
    outputs_free(&o);
    return out;
}

/* The number of tweak_width-byte tweaks in tw, or 0 with the key error set (a width other than 33 or 64,
 * or a length that is not a whole number of tweaks). */
static int tweak_count(const Py_buffer *tw, Py_ssize_t width, size_t *n) {
    if (width != 33 && width != 64) {
        PyErr_Format(E_KEY, "tweak_width must be 33 or 64, not %zd", width);
        return 0;
    }
    if (tw->len % width) {
        PyErr_Format(E_KEY, "tweaks: %zd bytes is not a whole number of %zd-byte tweaks", tw->len, width);
        return 0;
    }
    *n = (size_t)(tw->len / width);
    return 1;
}

/* scan_tweaks_packed(scanner, tweaks, tweak_width, outputs32, counts, threads)
 *   -> [(tx_index, output_index, tweak32, label | None)] */
static PyObject *py_scan_tweaks_packed(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *scanner, *out = NULL;
    Py_buffer tw, ob, cb;
    Py_ssize_t width, threads;
    const spn_scanner *sc;
    size_t n = 0, *first = NULL;
    const unsigned char **xs = NULL;
    spn_batch_found *found = NULL;
    long n_found = 0;
    ScannerObject *held = NULL;
    if (!PyArg_ParseTuple(args, "Oy*ny*y*n:scan_tweaks_packed", &scanner, &tw, &width, &ob, &cb, &threads)) return NULL;
    if (!spn_py_ready() || !spn_py_scanner_of(scanner, &sc)) goto done;
    held = (ScannerObject *)scanner;
    held->busy++;
    if (!tweak_count(&tw, width, &n)) goto done;
    if ((size_t)cb.len != 4 * n) {
        PyErr_Format(E_DATA, "counts: %zd bytes for %zu tweaks (one uint32 LE per tweak)", cb.len, n);
        goto done;
    }
    if (threads < 1) {
        PyErr_Format(PyExc_ValueError, "threads must be at least 1, not %zd", threads);
        goto done;
    }
    const unsigned char *c = cb.buf;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (uint64_t)c[4 * i] | (uint64_t)c[4 * i + 1] << 8 | (uint64_t)c[4 * i + 2] << 16 | (uint64_t)c[4 * i + 3] << 24;
    if (ob.len % 32 || total != (uint64_t)ob.len / 32) {
        PyErr_Format(E_DATA, "outputs32: %zd bytes, but the counts add up to %llu keys of 32 bytes", ob.len,
                     (unsigned long long)total);
        goto done;
    }
    first = malloc((n + 1) * sizeof *first);
    xs = malloc((total ? total : 1) * sizeof *xs);
    if (!first || !xs) {
        PyErr_NoMemory();
        goto done;
    }
    first[0] = 0;
    for (size_t i = 0; i < n; i++)
        first[i + 1] = first[i] + ((size_t)c[4 * i] | (size_t)c[4 * i + 1] << 8 | (size_t)c[4 * i + 2] << 16 | (size_t)c[4 * i + 3] << 24);
    for (size_t j = 0; j < (size_t)total; j++) xs[j] = (const unsigned char *)ob.buf + 32 * j;
    spn_batch b = {n, tw.buf, (size_t)width, NULL, NULL, xs, first};
    if ((n_found = run_batch(sc, &b, (size_t)threads, 1, &found, "tweak of tx %zu is not a valid point")) < 0) goto done;
    out = found_list(found, n_found, 1);
done:
    if (held) held->busy--;
    found_free(found, n_found);
    free(first);
    free(xs);
    PyBuffer_Release(&tw);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&cb);
    return out;
}

/* k0_outputs(scanner, tweaks, tweak_width, threads) -> n × (1 + L) × 32 bytes (see spn_k0_outputs) */
static PyObject *py_k0_outputs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *scanner, *out = NULL;
    Py_buffer tw;
    Py_ssize_t width, threads;
    const spn_scanner *sc;
    ScannerObject *held = NULL;
    size_t bad = 0;
    long ret;
    if (!PyArg_ParseTuple(args, "Oy*nn:k0_outputs", &scanner, &tw, &width, &threads)) return NULL;
    if (!spn_py_ready() || !spn_py_scanner_of(scanner, &sc)) goto done;
    held = (ScannerObject *)scanner;
    held->busy++;
    size_t n;
    if (!tweak_count(&tw, width, &n)) goto done;
    if (threads < 1) {
        PyErr_Format(PyExc_ValueError, "threads must be at least 1, not %zd", threads);
        goto done;
    }
    size_t size = n * (1 + sc->n_labels) * 32;
    if (!(out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size))) goto done;
    spn_ecc_enter();
    Py_BEGIN_ALLOW_THREADS
    ret = spn_k0_outputs(sc, tw.buf, (size_t)width, n, (size_t)threads, (unsigned char *)PyBytes_AS_STRING(out), &bad);
    Py_END_ALLOW_THREADS
    spn_ecc_leave();
    if (ret != 1) {
        Py_CLEAR(out);
        if (ret == SPN_EKEY) PyErr_Format(E_KEY, "tweak %zu is not a valid point", bad);
        else spn_py_raise_code(ret, "");
    }
done:
    if (held) held->busy--;
    PyBuffer_Release(&tw);
    return out;
}

/* shared_secret(tweak33, scan_key32) -> ser_P(b_scan·tweak) */
static PyObject *py_shared_secret(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const unsigned char *t33, *k32;
    secp256k1_pubkey tweak;
    unsigned char key[32], ecdh33[33];
    PyObject *out = NULL;
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "shared_secret takes 2 arguments");
    if (!spn_py_ready() || !spn_py_fixed(args[0], 33, &t33, "tweak33")) return NULL;
    if (!spn_parse33(spn_ctx.public, &tweak, t33)) {
        PyErr_SetString(E_KEY, "tweak33 is not a valid compressed point");
        return NULL;
    }
    if (!spn_py_fixed(args[1], 32, &k32, "scan_key32")) return NULL;
    memcpy(key, k32, 32);
    if (spn_ecdh33(spn_ctx.public, ecdh33, &tweak, key)) out = PyBytes_FromStringAndSize((const char *)ecdh33, 33);
    else PyErr_SetString(E_KEY, "scan_key32 is not a valid secret key (0 or >= n)");
    spn_cleanse(key, sizeof key);
    spn_cleanse(ecdh33, sizeof ecdh33);
    return out;
}
int spn_py_scanner_add(PyObject *module) {
    if (!(ScannerType = (PyTypeObject *)PyType_FromSpec(&scanner_spec))) return 0;
    return PyModule_AddObjectRef(module, "Scanner", (PyObject *)ScannerType) == 0;
}

PyMethodDef spn_py_scan_methods[] = {
    {"scan_tx", (PyCFunction)(void (*)(void))py_scan_tx, METH_FASTCALL, "scan_tx(scanner, inputs, outputs32) -> [(index, tweak32, label)]"},
    {"scan_tweak", (PyCFunction)(void (*)(void))py_scan_tweak, METH_FASTCALL, "scan_tweak(scanner, tweak33, outputs32) -> [(index, tweak32, label)]"},
    {"scan_tweaks_packed", py_scan_tweaks_packed, METH_VARARGS, "scan_tweaks_packed(scanner, tweaks, tweak_width, outputs32, counts, threads) -> [(tx, index, tweak32, label)]"},
    {"k0_outputs", py_k0_outputs, METH_VARARGS, "k0_outputs(scanner, tweaks, tweak_width, threads) -> x(P_0) and x(P_0 + L_m) per tweak"},
    {"shared_secret", (PyCFunction)(void (*)(void))py_shared_secret, METH_FASTCALL, "shared_secret(tweak33, scan_key32) -> ecdh33"},
    {NULL, NULL, 0, NULL},
};
