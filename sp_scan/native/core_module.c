/* sp_scan.native._core: the Python face of the C stages. Private: only sp_scan/native/__init__.py
 * imports it, binds libsecp256k1 with init() and wraps results in the library's types. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>

#include "core.h"
#include "sha256.h"

/* Typed errors handed over by the door at init(). */
static PyObject *E_KEY, *E_DATA, *E_BLOCK, *E_PREVOUTS, *E_SEND, *E_KEYSUM, *E_KMAX, *E_CONFIG;
static PyObject *S_OUTPOINT, *S_TXID, *S_VOUT, *S_SCRIPT_SIG, *S_WITNESS, *S_PREVOUT;
static int bound;

static PyObject *raise_code(long code, const char *what) {
    switch (code) {
    case SPN_ENOMEM:
        return PyErr_NoMemory();
    case SPN_EKEY:
        PyErr_Format(E_KEY, "%s", what);
        break;
    case SPN_EBLOCK:
        PyErr_SetString(E_BLOCK, "block: does not parse (truncated, trailing bytes, bad count or segwit marker, or no coinbase)");
        break;
    case SPN_ESPENT:
        PyErr_SetString(E_DATA, "spent outputs: do not parse (truncated, trailing bytes, bad count or amount)");
        break;
    case SPN_ESHAPE:
        PyErr_SetString(E_PREVOUTS, "spent outputs do not match the block's transactions and inputs");
        break;
    case SPN_ESEND:
        PyErr_SetString(E_SEND, "need outpoints, at least one eligible input key and one recipient (or input_hash out of range)");
        break;
    case SPN_EKEYSUM:
        PyErr_SetString(E_KEYSUM, "input private keys sum to zero");
        break;
    case SPN_EKMAX:
        PyErr_Format(E_KMAX, "more than %d outputs for one scan key", SPN_K_MAX);
        break;
    default:
        PyErr_SetString(PyExc_RuntimeError, "sp_scan native: unexpected failure");
    }
    return NULL;
}

static int ready(void) {
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "sp_scan.native._core.init() was not called");
        return 0;
    }
    if (!spn_ecc_start()) {
        PyErr_SetString(PyExc_RuntimeError, "could not create the libsecp256k1 contexts");
        return 0;
    }
    return 1;
}

/* bytes or bytearray; 0 with no exception set otherwise. */
static int as_bytes(PyObject *o, const unsigned char **p, size_t *n) {
    if (PyBytes_Check(o)) {
        *p = (const unsigned char *)PyBytes_AS_STRING(o);
        *n = (size_t)PyBytes_GET_SIZE(o);
        return 1;
    }
    if (PyByteArray_Check(o)) {
        *p = (const unsigned char *)PyByteArray_AS_STRING(o);
        *n = (size_t)PyByteArray_GET_SIZE(o);
        return 1;
    }
    return 0;
}

static int fixed(PyObject *o, size_t width, const unsigned char **p, const char *name) {
    size_t n;
    if (!as_bytes(o, p, &n) || n != width) {
        PyErr_Format(E_KEY, "%s must be %zu bytes", name, width);
        return 0;
    }
    return 1;
}

static int span_of(PyObject *o, spn_span *s, const char *name) {
    if (!as_bytes(o, &s->p, &s->n)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes", name);
        return 0;
    }
    return 1;
}

/* Fill the witness view from a sequence of bytes. *hold keeps a converted sequence alive. */
static int witness_of(PyObject *w, spn_input *in, PyObject **hold) {
    PyObject *seq = PySequence_Fast(w, "witness must be a sequence of bytes");
    if (seq == NULL) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    in->wit_count = (size_t)n;
    for (Py_ssize_t i = n >= 2 ? n - 2 : 0; i < n; i++) {
        spn_span s;
        if (!span_of(PySequence_Fast_GET_ITEM(seq, i), &s, "witness item")) {
            Py_DECREF(seq);
            return 0;
        }
        if (i == n - 1) in->wit_last = s;
        else in->wit_prev = s;
    }
    if (seq == w) Py_DECREF(seq); /* tuple or list: owned by the caller's object */
    else *hold = seq;
    return 1;
}

/* Read a TxInput. Pointers borrow from objects the TxInput (held by the caller) keeps alive. */
static int input_of(PyObject *txin, spn_input *in, PyObject **hold) {
    PyObject *op = NULL, *txid = NULL, *vout = NULL, *sig = NULL, *wit = NULL, *prev = NULL;
    const unsigned char *t;
    unsigned long v;
    int ok = 0;
    memset(in, 0, sizeof *in);
    if (!(op = PyObject_GetAttr(txin, S_OUTPOINT)) || !(txid = PyObject_GetAttr(op, S_TXID)) ||
        !(vout = PyObject_GetAttr(op, S_VOUT)) || !(sig = PyObject_GetAttr(txin, S_SCRIPT_SIG)) ||
        !(wit = PyObject_GetAttr(txin, S_WITNESS)) || !(prev = PyObject_GetAttr(txin, S_PREVOUT)))
        goto done;
    if (!fixed(txid, 32, &t, "txid32")) goto done;
    v = PyLong_AsUnsignedLong(vout);
    if (PyErr_Occurred() || v > 0xffffffffUL) {
        PyErr_Clear();
        PyErr_SetString(E_KEY, "vout must fit in 4 bytes");
        goto done;
    }
    memcpy(in->outpoint36, t, 32);
    for (int i = 0; i < 4; i++) in->outpoint36[32 + i] = (unsigned char)(v >> (8 * i));
    ok = span_of(sig, &in->script_sig, "script_sig") && span_of(prev, &in->prevout, "prevout_script") &&
         witness_of(wit, in, hold);
done:
    Py_XDECREF(op);
    Py_XDECREF(txid);
    Py_XDECREF(vout);
    Py_XDECREF(sig);
    Py_XDECREF(wit);
    Py_XDECREF(prev);
    return ok;
}

typedef struct {
    PyObject *seq;   /* the inputs, as a fast sequence */
    PyObject *holds; /* converted witness sequences */
    spn_input *ins;
    size_t n;
} inputs_t;

static void inputs_free(inputs_t *x) {
    Py_XDECREF(x->seq);
    Py_XDECREF(x->holds);
    free(x->ins);
}

static int inputs_of(PyObject *obj, inputs_t *x) {
    memset(x, 0, sizeof *x);
    if (!(x->seq = PySequence_Fast(obj, "inputs must be a sequence of TxInput"))) return 0;
    x->n = (size_t)PySequence_Fast_GET_SIZE(x->seq);
    if (!(x->ins = malloc((x->n ? x->n : 1) * sizeof *x->ins))) {
        PyErr_NoMemory();
        return 0;
    }
    for (size_t i = 0; i < x->n; i++) {
        PyObject *hold = NULL;
        if (!input_of(PySequence_Fast_GET_ITEM(x->seq, (Py_ssize_t)i), &x->ins[i], &hold)) return 0;
        if (hold) {
            if (!x->holds && !(x->holds = PyList_New(0))) return 0;
            int r = PyList_Append(x->holds, hold);
            Py_DECREF(hold);
            if (r < 0) return 0;
        }
    }
    return 1;
}

static PyObject *key_bytes(int kind, const unsigned char ser33[33]) {
    if (kind == SPN_KEY_XONLY) return PyBytes_FromStringAndSize((const char *)ser33 + 1, 32);
    return PyBytes_FromStringAndSize((const char *)ser33, 33);
}

/* ---- extraction and summary ---- */

static PyObject *py_input_pubkey(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    spn_input in;
    PyObject *hold = NULL;
    unsigned char ser33[33];
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "input_pubkey takes 3 arguments");
    if (!ready()) return NULL;
    memset(&in, 0, sizeof in);
    if (!span_of(args[0], &in.prevout, "prevout_script") || !span_of(args[1], &in.script_sig, "script_sig") ||
        !witness_of(args[2], &in, &hold))
        return NULL;
    int kind = spn_input_pubkey(&in, NULL, ser33);
    Py_XDECREF(hold);
    if (kind == SPN_KEY_NONE) Py_RETURN_NONE;
    return key_bytes(kind, ser33);
}

static PyObject *py_tx_pubkeys(PyObject *self, PyObject *arg) {
    (void)self;
    inputs_t x;
    PyObject *out = NULL;
    if (!ready()) return NULL;
    if (!inputs_of(arg, &x)) goto done;
    for (size_t i = 0; i < x.n; i++)
        if (spn_is_witness_unknown(&x.ins[i].prevout)) {
            out = Py_NewRef(Py_None);
            goto done;
        }
    if (!(out = PyList_New(0))) goto done;
    for (size_t i = 0; i < x.n; i++) {
        unsigned char ser33[33];
        int kind = spn_input_pubkey(&x.ins[i], NULL, ser33);
        if (kind == SPN_KEY_NONE) continue;
        PyObject *k = key_bytes(kind, ser33);
        if (!k || PyList_Append(out, k) < 0) {
            Py_XDECREF(k);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(k);
    }
done:
    inputs_free(&x);
    return out;
}

static PyObject *py_summarize(PyObject *self, PyObject *arg) {
    (void)self;
    inputs_t x;
    spn_summary s;
    unsigned char tweak33[33];
    PyObject *out = NULL;
    int r;
    if (!ready()) return NULL;
    if (!inputs_of(arg, &x)) goto done;
    r = spn_summarize(x.ins, x.n, &s);
    if (r < 0) {
        raise_code(r, "");
    } else if (r == 0 || !spn_summary_tweak(&s, tweak33)) {
        out = Py_NewRef(Py_None);
    } else {
        out = Py_BuildValue("(y#y#y#y#)", s.outpoint_smallest36, (Py_ssize_t)36, s.pubkey_sum33, (Py_ssize_t)33,
                            s.input_hash32, (Py_ssize_t)32, tweak33, (Py_ssize_t)33);
    }
done:
    inputs_free(&x);
    return out;
}

/* ---- Scanner ---- */

typedef struct {
    PyObject_HEAD
    spn_scanner sc;
    int live;
    int busy; /* scans running on sc without the GIL: close() must wait for them */
} ScannerObject;

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
    if (!ready() || !fixed(scan_key, 32, &scan32, "scan_key32") || !fixed(spend, 33, &spend33, "spend_pubkey33"))
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
        if (!fixed(pl, 33, &l, "label point") || !fixed(pt, 32, &t, "label tweak")) goto done;
        m[i] = (uint32_t)v;
        memcpy(label33[i], l, 33);
        memcpy(tweak32[i], t, 32);
    }
    if (!(self = (ScannerObject *)type->tp_alloc(type, 0))) goto done;
    int r = spn_scanner_init(&self->sc, scan32, spend33, n, m, (const unsigned char(*)[33])label33,
                             (const unsigned char(*)[32])tweak32);
    if (r != 1) {
        Py_CLEAR(self);
        raise_code(r, "invalid scan key, spend public key or label");
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

static int scanner_of(PyObject *o, const spn_scanner **sc) {
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
        if (!as_bytes(PySequence_Fast_GET_ITEM(o->seq, (Py_ssize_t)i), &o->x[i], &len) || len != 32) {
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
    else if (n < 0) raise_code(n, "");
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
    inputs_t x = {0};
    outputs_t o = {0};
    spn_summary s;
    PyObject *out = NULL;
    int r;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "scan_tx takes 3 arguments");
    if (!ready() || !scanner_of(args[0], &sc) || !outputs_of(args[2], &o) || !inputs_of(args[1], &x)) goto done;
    r = spn_summarize(x.ins, x.n, &s);
    if (r == 1) out = scan_one(sc, NULL, &s, &o);
    else out = r < 0 ? raise_code(r, "") : PyList_New(0);
done:
    inputs_free(&x);
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
    if (!ready() || !scanner_of(args[0], &sc) || !fixed(args[1], 33, &t33, "tweak33")) return NULL;
    if (outputs_of(args[2], &o)) out = scan_one(sc, t33, NULL, &o);
    outputs_free(&o);
    return out;
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
    if (!ready() || !scanner_of(scanner, &sc)) goto done;
    held = (ScannerObject *)scanner;
    held->busy++;
    if (width != 33 && width != 64) {
        PyErr_Format(E_KEY, "tweak_width must be 33 or 64, not %zd", width);
        goto done;
    }
    if (tw.len % width) {
        PyErr_Format(E_KEY, "tweaks: %zd bytes is not a whole number of %zd-byte tweaks", tw.len, width);
        goto done;
    }
    n = (size_t)(tw.len / width);
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
    if (!ready() || !scanner_of(scanner, &sc)) goto done;
    held = (ScannerObject *)scanner;
    held->busy++;
    if (width != 33 && width != 64) {
        PyErr_Format(E_KEY, "tweak_width must be 33 or 64, not %zd", width);
        goto done;
    }
    if (tw.len % width) {
        PyErr_Format(E_KEY, "tweaks: %zd bytes is not a whole number of %zd-byte tweaks", tw.len, width);
        goto done;
    }
    if (threads < 1) {
        PyErr_Format(PyExc_ValueError, "threads must be at least 1, not %zd", threads);
        goto done;
    }
    size_t n = (size_t)(tw.len / width), size = n * (1 + sc->n_labels) * 32;
    if (!(out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size))) goto done;
    spn_ecc_enter();
    Py_BEGIN_ALLOW_THREADS
    ret = spn_k0_outputs(sc, tw.buf, (size_t)width, n, (size_t)threads, (unsigned char *)PyBytes_AS_STRING(out), &bad);
    Py_END_ALLOW_THREADS
    spn_ecc_leave();
    if (ret != 1) {
        Py_CLEAR(out);
        if (ret == SPN_EKEY) PyErr_Format(E_KEY, "tweak %zu is not a valid point", bad);
        else raise_code(ret, "");
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
    if (!ready() || !fixed(args[0], 33, &t33, "tweak33")) return NULL;
    if (!spn_parse33(spn_ctx.public, &tweak, t33)) {
        PyErr_SetString(E_KEY, "tweak33 is not a valid compressed point");
        return NULL;
    }
    if (!fixed(args[1], 32, &k32, "scan_key32")) return NULL;
    memcpy(key, k32, 32);
    if (spn_ecdh33(spn_ctx.public, ecdh33, &tweak, key)) out = PyBytes_FromStringAndSize((const char *)ecdh33, 33);
    else PyErr_SetString(E_KEY, "scan_key32 is not a valid secret key (0 or >= n)");
    spn_cleanse(key, sizeof key);
    spn_cleanse(ecdh33, sizeof ecdh33);
    return out;
}

/* ---- sending ---- */

typedef struct {
    unsigned char (*outpoints)[36];
    size_t n_outpoints;
    unsigned char (*keys)[32];
    unsigned char *is_taproot;
    size_t n_keys;
} send_args;

static void send_args_free(send_args *a) {
    if (a->keys) spn_cleanse(a->keys, (a->n_keys ? a->n_keys : 1) * 32);
    free(a->keys);
    free(a->outpoints);
    free(a->is_taproot);
}

static int send_args_of(PyObject *outpoints, PyObject *keys, send_args *a) {
    PyObject *ops = NULL, *ks = NULL;
    int ok = 0;
    memset(a, 0, sizeof *a);
    if (!(ops = PySequence_Fast(outpoints, "outpoints must be a sequence of 36-byte outpoints")) ||
        !(ks = PySequence_Fast(keys, "input keys must be a sequence of (private_key32, is_taproot)")))
        goto done;
    a->n_outpoints = (size_t)PySequence_Fast_GET_SIZE(ops);
    a->n_keys = (size_t)PySequence_Fast_GET_SIZE(ks);
    a->outpoints = malloc((a->n_outpoints ? a->n_outpoints : 1) * 36);
    a->keys = malloc((a->n_keys ? a->n_keys : 1) * 32);
    a->is_taproot = malloc(a->n_keys ? a->n_keys : 1);
    if (!a->outpoints || !a->keys || !a->is_taproot) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < a->n_outpoints; i++) {
        const unsigned char *p;
        if (!fixed(PySequence_Fast_GET_ITEM(ops, (Py_ssize_t)i), 36, &p, "outpoint")) goto done;
        memcpy(a->outpoints[i], p, 36);
    }
    for (size_t i = 0; i < a->n_keys; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(ks, (Py_ssize_t)i);
        const unsigned char *p;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "input keys must be (private_key32, is_taproot) pairs");
            goto done;
        }
        if (!fixed(PyTuple_GET_ITEM(item, 0), 32, &p, "private_key32")) goto done;
        int tr = PyObject_IsTrue(PyTuple_GET_ITEM(item, 1));
        if (tr < 0) goto done;
        memcpy(a->keys[i], p, 32);
        a->is_taproot[i] = (unsigned char)tr;
    }
    ok = 1;
done:
    Py_XDECREF(ops);
    Py_XDECREF(ks);
    return ok;
}

/* create_outputs(outpoints36, keys, recipients: [(scan33, spend33)]) -> [output32] */
static PyObject *py_create_outputs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    send_args a;
    PyObject *rs = NULL, *out = NULL;
    spn_recipient *recips = NULL;
    unsigned char(*outputs)[32] = NULL;
    size_t n = 0;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "create_outputs takes 3 arguments");
    if (!ready()) return NULL;
    if (!send_args_of(args[0], args[1], &a)) goto done;
    if (!(rs = PySequence_Fast(args[2], "recipients must be a sequence of (scan33, spend33)"))) goto done;
    n = (size_t)PySequence_Fast_GET_SIZE(rs);
    recips = malloc((n ? n : 1) * sizeof *recips);
    outputs = malloc((n ? n : 1) * sizeof *outputs);
    if (!recips || !outputs) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(rs, (Py_ssize_t)i);
        const unsigned char *s, *b;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "recipients must be (scan33, spend33) pairs");
            goto done;
        }
        if (!fixed(PyTuple_GET_ITEM(item, 0), 33, &s, "scan_pubkey33") ||
            !fixed(PyTuple_GET_ITEM(item, 1), 33, &b, "spend_pubkey33"))
            goto done;
        memcpy(recips[i].scan33, s, 33);
        memcpy(recips[i].spend33, b, 33);
    }
    int r = spn_create_outputs(outputs, (const unsigned char(*)[36])a.outpoints, a.n_outpoints,
                               (const unsigned char(*)[32])a.keys, a.is_taproot, a.n_keys, recips, n);
    if (r != 1) {
        raise_code(r, "invalid private key, or a recipient key is not a valid compressed point");
        goto done;
    }
    if (!(out = PyList_New((Py_ssize_t)n))) goto done;
    for (size_t i = 0; i < n; i++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)outputs[i], 32);
        if (!b) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, b);
    }
done:
    send_args_free(&a);
    Py_XDECREF(rs);
    free(recips);
    free(outputs);
    return out;
}

/* send_shared_secret(outpoints36, keys, scan33) -> ser_P((input_hash·a)·B_scan) */
static PyObject *py_send_shared_secret(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    send_args a;
    const unsigned char *s33;
    unsigned char ecdh33[33];
    PyObject *out = NULL;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "send_shared_secret takes 3 arguments");
    if (!ready()) return NULL;
    if (!send_args_of(args[0], args[1], &a)) goto done;
    if (!fixed(args[2], 33, &s33, "scan_pubkey33")) goto done;
    int r = spn_send_shared_secret(ecdh33, (const unsigned char(*)[36])a.outpoints, a.n_outpoints,
                                   (const unsigned char(*)[32])a.keys, a.is_taproot, a.n_keys, s33);
    if (r == 1) out = PyBytes_FromStringAndSize((const char *)ecdh33, 33);
    else raise_code(r, "invalid private key, or scan_pubkey33 is not a valid compressed point");
    spn_cleanse(ecdh33, sizeof ecdh33);
done:
    send_args_free(&a);
    return out;
}

/* ---- BIP374 proofs and BIP375 ECDH shares ---- */

/* dleq_prove(a32, b33, r32, g33, m32 | None) -> (a_pub33, c33, proof64) | None (the BIP fails) */
static PyObject *py_dleq_prove(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const unsigned char *a32, *b33, *r32, *g33, *m32 = NULL;
    unsigned char proof[64], a_pub[33], c[33];
    PyObject *out = NULL;
    if (nargs != 5) return PyErr_Format(PyExc_TypeError, "dleq_prove takes 5 arguments");
    if (!ready()) return NULL;
    if (!fixed(args[0], 32, &a32, "a32") || !fixed(args[1], 33, &b33, "B33") || !fixed(args[2], 32, &r32, "r32") ||
        !fixed(args[3], 33, &g33, "G33") || (args[4] != Py_None && !fixed(args[4], 32, &m32, "m")))
        return NULL;
    int r = spn_dleq_prove(proof, a_pub, c, a32, b33, g33, r32, m32);
    if (r == 1) out = Py_BuildValue("(y#y#y#)", a_pub, (Py_ssize_t)33, c, (Py_ssize_t)33, proof, (Py_ssize_t)64);
    else if (r == 0) out = Py_NewRef(Py_None);
    else raise_code(r, "B33 or G33 is not a valid compressed point");
    spn_cleanse(c, sizeof c); /* C = a·B: with B a scan key, an ECDH share */
    return out;
}

/* ecdh_share(keys, scan33, r32) -> (share33, a_pub33, proof64) | None (proof generation failed) */
static PyObject *py_ecdh_share(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    send_args a;
    const unsigned char *s33, *r32;
    unsigned char share[33], a_pub[33], proof[64];
    PyObject *out = NULL, *none = NULL;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "ecdh_share takes 3 arguments");
    if (!ready()) return NULL;
    if (!(none = PyTuple_New(0))) return NULL;
    if (!send_args_of(none, args[0], &a)) goto done;
    if (!fixed(args[1], 33, &s33, "scan_pubkey33") || !fixed(args[2], 32, &r32, "aux_rand32")) goto done;
    int r = a.n_keys == 0 ? SPN_ESEND
                          : spn_ecdh_share_prove(share, a_pub, proof, (const unsigned char(*)[32])a.keys, a.is_taproot,
                                                 a.n_keys, s33, r32);
    if (r == 1) out = Py_BuildValue("(y#y#y#)", share, (Py_ssize_t)33, a_pub, (Py_ssize_t)33, proof, (Py_ssize_t)64);
    else if (r == 0) out = Py_NewRef(Py_None);
    else raise_code(r, "invalid private key, or scan_pubkey33 is not a valid compressed point");
    spn_cleanse(share, sizeof share);
done:
    send_args_free(&a);
    Py_DECREF(none);
    return out;
}

/* ---- blocks (the GIL is released while parsing and computing) ---- */

static PyObject *py_block_tweaks(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer block, spent;
    spn_tx_tweak *res = NULL;
    long n;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*:block_tweaks", &block, &spent)) return NULL;
    if (ready()) {
        spn_ecc_enter();
        Py_BEGIN_ALLOW_THREADS
        n = spn_block_tweaks(block.buf, (size_t)block.len, spent.buf, (size_t)spent.len, &res);
        Py_END_ALLOW_THREADS
        spn_ecc_leave();
        if (n < 0) {
            raise_code(n, "");
        } else if ((out = PyList_New(n))) {
            for (long i = 0; i < n; i++) {
                PyObject *t = Py_BuildValue("(y#y#)", res[i].txid32, (Py_ssize_t)32, res[i].tweak33, (Py_ssize_t)33);
                if (!t) {
                    Py_CLEAR(out);
                    break;
                }
                PyList_SET_ITEM(out, i, t);
            }
        }
    }
    free(res);
    PyBuffer_Release(&block);
    PyBuffer_Release(&spent);
    return out;
}

static PyObject *py_block_scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer block, spent;
    PyObject *scanner, *out = NULL;
    const spn_scanner *sc;
    spn_block_match *res = NULL;
    long n = 0;
    if (!PyArg_ParseTuple(args, "y*y*O:block_scan", &block, &spent, &scanner)) return NULL;
    if (ready() && scanner_of(scanner, &sc)) {
        ((ScannerObject *)scanner)->busy++;
        spn_ecc_enter();
        Py_BEGIN_ALLOW_THREADS
        n = spn_block_scan(block.buf, (size_t)block.len, spent.buf, (size_t)spent.len, sc, &res);
        Py_END_ALLOW_THREADS
        spn_ecc_leave();
        ((ScannerObject *)scanner)->busy--;
        if (n < 0) {
            raise_code(n, "");
        } else if ((out = PyList_New(n))) {
            for (long i = 0; i < n; i++) {
                spn_block_match *m = &res[i];
                PyObject *label = m->label < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(m->label);
                PyObject *t = label ? Py_BuildValue("(y#kLy#y#N)", m->txid32, (Py_ssize_t)32, (unsigned long)m->vout,
                                                    (long long)m->amount, m->output32, (Py_ssize_t)32, m->tweak32,
                                                    (Py_ssize_t)32, label)
                                    : NULL;
                if (!t) {
                    Py_CLEAR(out);
                    break;
                }
                PyList_SET_ITEM(out, i, t);
            }
        }
    }
    if (res) spn_cleanse(res, (size_t)(n > 0 ? n : 0) * sizeof *res);
    free(res);
    PyBuffer_Release(&block);
    PyBuffer_Release(&spent);
    return out;
}

/* block_index(block, spent) -> (hash32, prev32, time, block_txs, txids32, tweaks33, tweaks64, out_counts4,
 * out_vouts4, out_keys32, out_values8, max_values8, taproot_keys32, spent_outpoints36) */
static PyObject *py_block_index(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer block, spent;
    spn_block_index x;
    int r = 0;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*:block_index", &block, &spent)) return NULL;
    if (ready()) {
        spn_ecc_enter();
        Py_BEGIN_ALLOW_THREADS
        r = spn_block_index_build(block.buf, (size_t)block.len, spent.buf, (size_t)spent.len, &x);
        Py_END_ALLOW_THREADS
        spn_ecc_leave();
        if (r != 1) {
            raise_code(r, "");
        } else {
#define SIZED(p, n) (const char *)(p), (Py_ssize_t)(n)
            out = Py_BuildValue("(y#y#kny#y#y#y#y#y#y#y#y#y#)", SIZED(x.hash32, 32), SIZED(x.prev32, 32),
                                (unsigned long)x.time, (Py_ssize_t)x.block_txs, SIZED(x.txids32, 32 * x.n_tx),
                                SIZED(x.tweaks33, 33 * x.n_tx), SIZED(x.tweaks64, 64 * x.n_tx),
                                SIZED(x.out_counts4, 4 * x.n_tx), SIZED(x.out_vouts4, 4 * x.n_out),
                                SIZED(x.out_keys32, 32 * x.n_out), SIZED(x.out_values8, 8 * x.n_out),
                                SIZED(x.max_values8, 8 * x.n_tx), SIZED(x.taproot_keys32, 32 * x.n_keys),
                                SIZED(x.spent_outpoints36, 36 * x.n_spent));
#undef SIZED
            spn_block_index_free(&x);
        }
    }
    PyBuffer_Release(&block);
    PyBuffer_Release(&spent);
    return out;
}

/* ---- setup ---- */

static const char *const API_NAMES[] = {
    "secp256k1_context_create",   "secp256k1_context_destroy",   "secp256k1_context_randomize",
    "secp256k1_context_set_illegal_callback", "secp256k1_ec_pubkey_parse", "secp256k1_ec_pubkey_serialize",
    "secp256k1_ec_pubkey_combine", "secp256k1_ec_pubkey_negate",  "secp256k1_ec_pubkey_tweak_mul",
    "secp256k1_ec_pubkey_create", "secp256k1_ec_seckey_verify",  "secp256k1_ec_seckey_negate",
    "secp256k1_ec_seckey_tweak_add", "secp256k1_ec_seckey_tweak_mul", "secp256k1_ecdh",
};

static int error_of(PyObject *errors, const char *name, PyObject **slot) {
    PyObject *e = PyDict_GetItemString(errors, name);
    if (e == NULL || !PyExceptionClass_Check(e)) {
        PyErr_Format(PyExc_ValueError, "init: errors[%s] must be an exception class", name);
        return 0;
    }
    Py_XSETREF(*slot, Py_NewRef(e));
    return 1;
}

/* init(addresses: {name: int}, errors: {name: type}, ec_engine: str) binds libsecp256k1 and the typed
 * errors, then starts the EC engine every scan uses ("" for the best this CPU runs; errors["config"]
 * when it cannot run here). */
static PyObject *py_init(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *addresses, *errors;
    const char *engine;
    char why[200];
    void *ptrs[sizeof API_NAMES / sizeof *API_NAMES];
    if (!PyArg_ParseTuple(args, "O!O!s:init", &PyDict_Type, &addresses, &PyDict_Type, &errors, &engine)) return NULL;
    if (bound) Py_RETURN_NONE;
    for (size_t i = 0; i < sizeof API_NAMES / sizeof *API_NAMES; i++) {
        PyObject *v = PyDict_GetItemString(addresses, API_NAMES[i]);
        if (v == NULL) return PyErr_Format(PyExc_ValueError, "init: missing %s", API_NAMES[i]);
        ptrs[i] = PyLong_AsVoidPtr(v);
        if (ptrs[i] == NULL) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "init: NULL %s", API_NAMES[i]);
    }
    if (!error_of(errors, "key", &E_KEY) || !error_of(errors, "data", &E_DATA) || !error_of(errors, "block", &E_BLOCK) ||
        !error_of(errors, "prevouts", &E_PREVOUTS) || !error_of(errors, "send", &E_SEND) ||
        !error_of(errors, "keysum", &E_KEYSUM) || !error_of(errors, "kmax", &E_KMAX) ||
        !error_of(errors, "config", &E_CONFIG))
        return NULL;
    size_t i = 0;
    /* Data pointers to functions: POSIX guarantees the conversion; memcpy keeps ISO C quiet. */
#define BIND(field) memcpy(&spn_secp.field, &ptrs[i++], sizeof(void *))
    BIND(context_create);
    BIND(context_destroy);
    BIND(context_randomize);
    BIND(context_set_illegal_callback);
    BIND(ec_pubkey_parse);
    BIND(ec_pubkey_serialize);
    BIND(ec_pubkey_combine);
    BIND(ec_pubkey_negate);
    BIND(ec_pubkey_tweak_mul);
    BIND(ec_pubkey_create);
    BIND(ec_seckey_verify);
    BIND(ec_seckey_negate);
    BIND(ec_seckey_tweak_add);
    BIND(ec_seckey_tweak_mul);
    BIND(ecdh);
#undef BIND
    bound = 1;
    if (!spn_engine_select(engine, why, sizeof why)) {
        PyErr_SetString(E_CONFIG, why);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_set_label_strategy(PyObject *self, PyObject *arg) {
    (void)self;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v < SPN_STRATEGY_AUTO || v > SPN_STRATEGY_LABELSET) return PyErr_Format(PyExc_ValueError, "unknown strategy %ld", v);
    long old = spn_label_strategy;
    spn_label_strategy = (int)v;
    return PyLong_FromLong(old);
}

static PyObject *py_contexts_started(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(spn_ctx.secret != NULL);
}

static PyObject *py_ec_engine(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (!ready()) return NULL;
    return PyUnicode_FromString(spn_engine_active->name);
}

#ifdef SPN_TESTING
#include "testing_hooks.c" /* the test-only build (sp_scan.native._testcore): per-engine hooks */
#endif

static PyMethodDef methods[] = {
    {"init", py_init, METH_VARARGS, "init(addresses, errors, ec_engine): bind libsecp256k1 and the typed errors, start the EC engine."},
    {"input_pubkey", (PyCFunction)(void (*)(void))py_input_pubkey, METH_FASTCALL, "input_pubkey(prevout_script, script_sig, witness) -> bytes | None"},
    {"tx_pubkeys", py_tx_pubkeys, METH_O, "tx_pubkeys(inputs) -> list[bytes] | None"},
    {"summarize", py_summarize, METH_O, "summarize(inputs) -> (outpoint36, sum33, input_hash32, tweak33) | None"},
    {"scan_tx", (PyCFunction)(void (*)(void))py_scan_tx, METH_FASTCALL, "scan_tx(scanner, inputs, outputs32) -> [(index, tweak32, label)]"},
    {"scan_tweak", (PyCFunction)(void (*)(void))py_scan_tweak, METH_FASTCALL, "scan_tweak(scanner, tweak33, outputs32) -> [(index, tweak32, label)]"},
    {"scan_tweaks_packed", py_scan_tweaks_packed, METH_VARARGS, "scan_tweaks_packed(scanner, tweaks, tweak_width, outputs32, counts, threads) -> [(tx, index, tweak32, label)]"},
    {"k0_outputs", py_k0_outputs, METH_VARARGS, "k0_outputs(scanner, tweaks, tweak_width, threads) -> x(P_0) and x(P_0 + L_m) per tweak"},
    {"shared_secret", (PyCFunction)(void (*)(void))py_shared_secret, METH_FASTCALL, "shared_secret(tweak33, scan_key32) -> ecdh33"},
    {"create_outputs", (PyCFunction)(void (*)(void))py_create_outputs, METH_FASTCALL, "create_outputs(outpoints36, keys, recipients) -> [output32]"},
    {"send_shared_secret", (PyCFunction)(void (*)(void))py_send_shared_secret, METH_FASTCALL, "send_shared_secret(outpoints36, keys, scan33) -> ecdh33"},
    {"dleq_prove", (PyCFunction)(void (*)(void))py_dleq_prove, METH_FASTCALL, "dleq_prove(a32, B33, r32, G33, m32 | None) -> (A33, C33, proof64) | None"},
    {"ecdh_share", (PyCFunction)(void (*)(void))py_ecdh_share, METH_FASTCALL, "ecdh_share(keys, scan33, aux_rand32) -> (share33, A33, proof64) | None"},
    {"block_tweaks", py_block_tweaks, METH_VARARGS, "block_tweaks(block, spent) -> [(txid32, tweak33)]"},
    {"block_scan", py_block_scan, METH_VARARGS, "block_scan(block, spent, scanner) -> [(txid32, vout, amount, output32, tweak32, label)]"},
    {"block_index", py_block_index, METH_VARARGS, "block_index(block, spent) -> the tweak index's packed arrays of one block"},
    {"set_label_strategy", py_set_label_strategy, METH_O, "set_label_strategy(0 auto | 1 bip | 2 labelset) -> previous"},
    {"ec_engine", py_ec_engine, METH_NOARGS, "ec_engine() -> the EC engine in use: \"ifma\", \"avx2\", \"scalar\" or \"libsecp256k1\"."},
    {"contexts_started", py_contexts_started, METH_NOARGS, "True once the two libsecp256k1 contexts exist."},
    {NULL, NULL, 0, NULL},
};

#ifdef SPN_TESTING
#define SPN_MODULE_NAME "_testcore"
#define SPN_MODULE_INIT PyInit__testcore
#define SPN_MODULE_DOC "sp-scan's C stages with the engines' test hooks (tests only; use sp_scan.native._testing)."
#else
#define SPN_MODULE_NAME "_core"
#define SPN_MODULE_INIT PyInit__core
#define SPN_MODULE_DOC "sp-scan's C stages (private; use sp_scan.native)."
#endif

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, SPN_MODULE_NAME, SPN_MODULE_DOC, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC SPN_MODULE_INIT(void) {
    const char *env = getenv("SP_SCAN_SHA256");
    spn_sha256_select(env != NULL && strcmp(env, "portable") == 0);
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (!(S_OUTPOINT = PyUnicode_InternFromString("outpoint")) || !(S_TXID = PyUnicode_InternFromString("txid32")) ||
        !(S_VOUT = PyUnicode_InternFromString("vout")) || !(S_SCRIPT_SIG = PyUnicode_InternFromString("script_sig")) ||
        !(S_WITNESS = PyUnicode_InternFromString("witness")) || !(S_PREVOUT = PyUnicode_InternFromString("prevout_script")))
        goto fail;
    if (!(ScannerType = (PyTypeObject *)PyType_FromSpec(&scanner_spec))) goto fail;
    if (PyModule_AddObjectRef(m, "Scanner", (PyObject *)ScannerType) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "K_MAX", SPN_K_MAX) < 0 || PyModule_AddIntConstant(m, "STRATEGY_AUTO", SPN_STRATEGY_AUTO) < 0 ||
        PyModule_AddIntConstant(m, "STRATEGY_BIP", SPN_STRATEGY_BIP) < 0 ||
        PyModule_AddIntConstant(m, "STRATEGY_LABELSET", SPN_STRATEGY_LABELSET) < 0)
        goto fail;
#ifdef SPN_TESTING
    if (PyModule_AddFunctions(m, testing_methods) < 0) goto fail;
#endif
    if (Py_AtExit(spn_ecc_stop) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
