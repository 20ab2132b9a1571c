/* Python bindings of extraction and summary (core_extract.c). */
#include "core_bind.h"

static PyObject *key_bytes(int kind, const unsigned char ser33[33]) {
    if (kind == SPN_KEY_XONLY) return PyBytes_FromStringAndSize((const char *)ser33 + 1, 32);
    return PyBytes_FromStringAndSize((const char *)ser33, 33);
}

static PyObject *py_input_pubkey(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    spn_input in;
    PyObject *hold = NULL;
    unsigned char ser33[33];
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "input_pubkey takes 3 arguments");
    if (!spn_py_ready()) return NULL;
    memset(&in, 0, sizeof in);
    if (!spn_py_span_of(args[0], &in.prevout, "prevout_script") ||
        !spn_py_span_of(args[1], &in.script_sig, "script_sig") || !spn_py_witness_of(args[2], &in, &hold))
        return NULL;
    int kind = spn_input_pubkey(&in, NULL, ser33);
    Py_XDECREF(hold);
    if (kind == SPN_KEY_NONE) Py_RETURN_NONE;
    return key_bytes(kind, ser33);
}

static PyObject *py_tx_pubkeys(PyObject *self, PyObject *arg) {
    (void)self;
    spn_py_inputs x;
    PyObject *out = NULL;
    if (!spn_py_ready()) return NULL;
    if (!spn_py_inputs_of(arg, &x)) goto done;
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
    spn_py_inputs_free(&x);
    return out;
}

static PyObject *py_summarize(PyObject *self, PyObject *arg) {
    (void)self;
    spn_py_inputs x;
    spn_summary s;
    unsigned char tweak33[33];
    PyObject *out = NULL;
    int r;
    if (!spn_py_ready()) return NULL;
    if (!spn_py_inputs_of(arg, &x)) goto done;
    r = spn_summarize(x.ins, x.n, &s);
    if (r < 0) {
        spn_py_raise_code(r, "");
    } else if (r == 0 || !spn_summary_tweak(&s, tweak33)) {
        out = Py_NewRef(Py_None);
    } else {
        out = Py_BuildValue("(y#y#y#y#)", s.outpoint_smallest36, (Py_ssize_t)36, s.pubkey_sum33, (Py_ssize_t)33,
                            s.input_hash32, (Py_ssize_t)32, tweak33, (Py_ssize_t)33);
    }
done:
    spn_py_inputs_free(&x);
    return out;
}

PyMethodDef spn_py_extract_methods[] = {
    {"input_pubkey", (PyCFunction)(void (*)(void))py_input_pubkey, METH_FASTCALL, "input_pubkey(prevout_script, script_sig, witness) -> bytes | None"},
    {"tx_pubkeys", py_tx_pubkeys, METH_O, "tx_pubkeys(inputs) -> list[bytes] | None"},
    {"summarize", py_summarize, METH_O, "summarize(inputs) -> (outpoint36, sum33, input_hash32, tweak33) | None"},
    {NULL, NULL, 0, NULL},
};
