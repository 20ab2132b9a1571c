/* Python bindings of Core's block files (core_corefiles.c); the GIL is released while hashing and decoding. */
#include "core_bind.h"

#include <stdlib.h>
#include <string.h>

/* spent_from_undo(undo) -> the REST spent-outputs bytes */
static PyObject *py_spent_from_undo(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer undo;
    unsigned char *spent = NULL;
    size_t len = 0;
    int r = 0;
    PyObject *out = NULL;
    if (PyObject_GetBuffer(arg, &undo, PyBUF_SIMPLE) < 0) return NULL;
    if (spn_py_ready()) {
        spn_ecc_enter();
        Py_BEGIN_ALLOW_THREADS
        r = spn_spent_from_undo(undo.buf, (size_t)undo.len, &spent, &len);
        Py_END_ALLOW_THREADS
        spn_ecc_leave();
        if (r != 1) {
            spn_py_raise_code(r, "");
        } else {
            out = PyBytes_FromStringAndSize((const char *)spent, (Py_ssize_t)len);
            free(spent);
        }
    }
    PyBuffer_Release(&undo);
    return out;
}

/* block_commits(block) -> bool */
static PyObject *py_block_commits(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer block;
    int r;
    if (PyObject_GetBuffer(arg, &block, PyBUF_SIMPLE) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    r = spn_block_commits(block.buf, (size_t)block.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&block);
    if (r < 0) return spn_py_raise_code(r, "");
    return PyBool_FromLong(r);
}

/* unxor(data, key8, offset) -> data XORed with the key from file offset `offset` */
static PyObject *py_unxor(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, key;
    unsigned long long offset;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*K:unxor", &data, &key, &offset)) return NULL;
    if (key.len != 8) {
        PyErr_Format(E_DATA, "key8: %zd bytes, not 8", key.len);
    } else if (data.len == 0) {
        out = PyBytes_FromStringAndSize(NULL, 0);
    } else if ((out = PyBytes_FromStringAndSize(NULL, data.len)) != NULL) { /* a new object: never a cached one */
        memcpy(PyBytes_AS_STRING(out), data.buf, (size_t)data.len);
        spn_unxor((unsigned char *)PyBytes_AS_STRING(out), (size_t)data.len, key.buf, offset);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&key);
    return out;
}

PyMethodDef spn_py_corefiles_methods[] = {
    {"spent_from_undo", py_spent_from_undo, METH_O, "spent_from_undo(undo) -> Core's undo data in the REST spent-outputs form"},
    {"block_commits", py_block_commits, METH_O, "block_commits(block) -> True when its header commits to its transactions (merkle root, witness commitment)"},
    {"unxor", py_unxor, METH_VARARGS, "unxor(data, key8, offset) -> data XORed with Core's block-file key from file offset `offset`"},
    {NULL, NULL, 0, NULL},
};
