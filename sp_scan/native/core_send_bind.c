/* Python bindings of sending (core_send.c). */
#include "core_bind.h"

#include <stdlib.h>

/* create_outputs(outpoints36, keys, recipients: [(scan33, spend33)]) -> [output32] */
static PyObject *py_create_outputs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    spn_py_send_args a;
    PyObject *rs = NULL, *out = NULL;
    spn_recipient *recips = NULL;
    unsigned char(*outputs)[32] = NULL;
    size_t n = 0;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "create_outputs takes 3 arguments");
    if (!spn_py_ready()) return NULL;
    if (!spn_py_send_args_of(args[0], args[1], &a)) goto done;
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
        if (!spn_py_fixed(PyTuple_GET_ITEM(item, 0), 33, &s, "scan_pubkey33") ||
            !spn_py_fixed(PyTuple_GET_ITEM(item, 1), 33, &b, "spend_pubkey33"))
            goto done;
        memcpy(recips[i].scan33, s, 33);
        memcpy(recips[i].spend33, b, 33);
    }
    int r = spn_create_outputs(outputs, (const unsigned char(*)[36])a.outpoints, a.n_outpoints,
                               (const unsigned char(*)[32])a.keys, a.is_taproot, a.n_keys, recips, n);
    if (r != 1) {
        spn_py_raise_code(r, "invalid private key, or a recipient key is not a valid compressed point");
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
    spn_py_send_args_free(&a);
    Py_XDECREF(rs);
    free(recips);
    free(outputs);
    return out;
}

/* send_shared_secret(outpoints36, keys, scan33) -> ser_P((input_hash·a)·B_scan) */
static PyObject *py_send_shared_secret(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    spn_py_send_args a;
    const unsigned char *s33;
    unsigned char ecdh33[33];
    PyObject *out = NULL;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "send_shared_secret takes 3 arguments");
    if (!spn_py_ready()) return NULL;
    if (!spn_py_send_args_of(args[0], args[1], &a)) goto done;
    if (!spn_py_fixed(args[2], 33, &s33, "scan_pubkey33")) goto done;
    int r = spn_send_shared_secret(ecdh33, (const unsigned char(*)[36])a.outpoints, a.n_outpoints,
                                   (const unsigned char(*)[32])a.keys, a.is_taproot, a.n_keys, s33);
    if (r == 1) out = PyBytes_FromStringAndSize((const char *)ecdh33, 33);
    else spn_py_raise_code(r, "invalid private key, or scan_pubkey33 is not a valid compressed point");
    spn_cleanse(ecdh33, sizeof ecdh33);
done:
    spn_py_send_args_free(&a);
    return out;
}

PyMethodDef spn_py_send_methods[] = {
    {"create_outputs", (PyCFunction)(void (*)(void))py_create_outputs, METH_FASTCALL, "create_outputs(outpoints36, keys, recipients) -> [output32]"},
    {"send_shared_secret", (PyCFunction)(void (*)(void))py_send_shared_secret, METH_FASTCALL, "send_shared_secret(outpoints36, keys, scan33) -> ecdh33"},
    {NULL, NULL, 0, NULL},
};
