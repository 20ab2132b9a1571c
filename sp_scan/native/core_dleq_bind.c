/* Python bindings of BIP374 proofs and BIP375 ECDH shares (core_dleq.c). */
#include "core_bind.h"

/* dleq_prove(a32, b33, r32, g33, m32 | None) -> (a_pub33, c33, proof64) | None (the BIP fails) */
static PyObject *py_dleq_prove(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const unsigned char *a32, *b33, *r32, *g33, *m32 = NULL;
    unsigned char proof[64], a_pub[33], c[33];
    PyObject *out = NULL;
    if (nargs != 5) return PyErr_Format(PyExc_TypeError, "dleq_prove takes 5 arguments");
    if (!spn_py_ready()) return NULL;
    if (!spn_py_fixed(args[0], 32, &a32, "a32") || !spn_py_fixed(args[1], 33, &b33, "B33") ||
        !spn_py_fixed(args[2], 32, &r32, "r32") || !spn_py_fixed(args[3], 33, &g33, "G33") ||
        (args[4] != Py_None && !spn_py_fixed(args[4], 32, &m32, "m")))
        return NULL;
    int r = spn_dleq_prove(proof, a_pub, c, a32, b33, g33, r32, m32);
    if (r == 1) out = Py_BuildValue("(y#y#y#)", a_pub, (Py_ssize_t)33, c, (Py_ssize_t)33, proof, (Py_ssize_t)64);
    else if (r == 0) out = Py_NewRef(Py_None);
    else spn_py_raise_code(r, "B33 or G33 is not a valid compressed point");
    spn_cleanse(c, sizeof c); /* C = a·B: with B a scan key, an ECDH share */
    return out;
}

/* ecdh_share(keys, scan33, r32) -> (share33, a_pub33, proof64) | None (proof generation failed) */
static PyObject *py_ecdh_share(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    spn_py_send_args a;
    const unsigned char *s33, *r32;
    unsigned char share[33], a_pub[33], proof[64];
    PyObject *out = NULL, *none = NULL;
    if (nargs != 3) return PyErr_Format(PyExc_TypeError, "ecdh_share takes 3 arguments");
    if (!spn_py_ready()) return NULL;
    if (!(none = PyTuple_New(0))) return NULL;
    if (!spn_py_send_args_of(none, args[0], &a)) goto done;
    if (!spn_py_fixed(args[1], 33, &s33, "scan_pubkey33") || !spn_py_fixed(args[2], 32, &r32, "aux_rand32")) goto done;
    int r = a.n_keys == 0 ? SPN_ESEND
                          : spn_ecdh_share_prove(share, a_pub, proof, (const unsigned char(*)[32])a.keys, a.is_taproot,
                                                 a.n_keys, s33, r32);
    if (r == 1) out = Py_BuildValue("(y#y#y#)", share, (Py_ssize_t)33, a_pub, (Py_ssize_t)33, proof, (Py_ssize_t)64);
    else if (r == 0) out = Py_NewRef(Py_None);
    else spn_py_raise_code(r, "invalid private key, or scan_pubkey33 is not a valid compressed point");
    spn_cleanse(share, sizeof share);
done:
    spn_py_send_args_free(&a);
    Py_DECREF(none);
    return out;
}

PyMethodDef spn_py_dleq_methods[] = {
    {"dleq_prove", (PyCFunction)(void (*)(void))py_dleq_prove, METH_FASTCALL, "dleq_prove(a32, B33, r32, G33, m32 | None) -> (A33, C33, proof64) | None"},
    {"ecdh_share", (PyCFunction)(void (*)(void))py_ecdh_share, METH_FASTCALL, "ecdh_share(keys, scan33, aux_rand32) -> (share33, A33, proof64) | None"},
    {NULL, NULL, 0, NULL},
};
