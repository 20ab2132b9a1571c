/* The bindings' shared helpers (declared in core_bind.h): typed errors, byte views, the TxInput and
 * sender-key readers. */
#include "core_bind.h"

#include <stdlib.h>

PyObject *E_KEY, *E_DATA, *E_BLOCK, *E_PREVOUTS, *E_SEND, *E_KEYSUM, *E_KMAX, *E_CONFIG;
static PyObject *S_OUTPOINT, *S_TXID, *S_VOUT, *S_SCRIPT_SIG, *S_WITNESS, *S_PREVOUT;
int spn_py_bound;

int spn_py_bind_start(void) {
    return (S_OUTPOINT = PyUnicode_InternFromString("outpoint")) && (S_TXID = PyUnicode_InternFromString("txid32")) &&
           (S_VOUT = PyUnicode_InternFromString("vout")) &&
           (S_SCRIPT_SIG = PyUnicode_InternFromString("script_sig")) &&
           (S_WITNESS = PyUnicode_InternFromString("witness")) &&
           (S_PREVOUT = PyUnicode_InternFromString("prevout_script"));
}

PyObject *spn_py_raise_code(long code, const char *what) {
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

int spn_py_ready(void) {
    if (!spn_py_bound) {
        PyErr_SetString(PyExc_RuntimeError, "sp_scan.native._core.init() was not called");
        return 0;
    }
    if (!spn_ecc_start()) {
        PyErr_SetString(PyExc_RuntimeError, "could not create the libsecp256k1 contexts");
        return 0;
    }
    return 1;
}

int spn_py_as_bytes(PyObject *o, const unsigned char **p, size_t *n) {
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

int spn_py_fixed(PyObject *o, size_t width, const unsigned char **p, const char *name) {
    size_t n;
    if (!spn_py_as_bytes(o, p, &n) || n != width) {
        PyErr_Format(E_KEY, "%s must be %zu bytes", name, width);
        return 0;
    }
    return 1;
}

int spn_py_span_of(PyObject *o, spn_span *s, const char *name) {
    if (!spn_py_as_bytes(o, &s->p, &s->n)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes", name);
        return 0;
    }
    return 1;
}

/* Fill the witness view from a sequence of bytes. *hold keeps a converted sequence alive. */
int spn_py_witness_of(PyObject *w, spn_input *in, PyObject **hold) {
    PyObject *seq = PySequence_Fast(w, "witness must be a sequence of bytes");
    if (seq == NULL) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    in->wit_count = (size_t)n;
    for (Py_ssize_t i = n >= 2 ? n - 2 : 0; i < n; i++) {
        spn_span s;
        if (!spn_py_span_of(PySequence_Fast_GET_ITEM(seq, i), &s, "witness item")) {
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
    if (!spn_py_fixed(txid, 32, &t, "txid32")) goto done;
    v = PyLong_AsUnsignedLong(vout);
    if (PyErr_Occurred() || v > 0xffffffffUL) {
        PyErr_Clear();
        PyErr_SetString(E_KEY, "vout must fit in 4 bytes");
        goto done;
    }
    memcpy(in->outpoint36, t, 32);
    for (int i = 0; i < 4; i++) in->outpoint36[32 + i] = (unsigned char)(v >> (8 * i));
    ok = spn_py_span_of(sig, &in->script_sig, "script_sig") && spn_py_span_of(prev, &in->prevout, "prevout_script") &&
         spn_py_witness_of(wit, in, hold);
done:
    Py_XDECREF(op);
    Py_XDECREF(txid);
    Py_XDECREF(vout);
    Py_XDECREF(sig);
    Py_XDECREF(wit);
    Py_XDECREF(prev);
    return ok;
}

void spn_py_inputs_free(spn_py_inputs *x) {
    Py_XDECREF(x->seq);
    Py_XDECREF(x->holds);
    free(x->ins);
}

int spn_py_inputs_of(PyObject *obj, spn_py_inputs *x) {
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

void spn_py_send_args_free(spn_py_send_args *a) {
    if (a->keys) spn_cleanse(a->keys, (a->n_keys ? a->n_keys : 1) * 32);
    free(a->keys);
    free(a->outpoints);
    free(a->is_taproot);
}

int spn_py_send_args_of(PyObject *outpoints, PyObject *keys, spn_py_send_args *a) {
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
        if (!spn_py_fixed(PySequence_Fast_GET_ITEM(ops, (Py_ssize_t)i), 36, &p, "outpoint")) goto done;
        memcpy(a->outpoints[i], p, 36);
    }
    for (size_t i = 0; i < a->n_keys; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(ks, (Py_ssize_t)i);
        const unsigned char *p;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "input keys must be (private_key32, is_taproot) pairs");
            goto done;
        }
        if (!spn_py_fixed(PyTuple_GET_ITEM(item, 0), 32, &p, "private_key32")) goto done;
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

