/* Python bindings of blocks (core_block.c); the GIL is released while parsing and computing. */
#include "core_bind.h"

#include <stdlib.h>

static PyObject *py_block_tweaks(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer block, spent;
    spn_tx_tweak *res = NULL;
    long n;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*:block_tweaks", &block, &spent)) return NULL;
    if (spn_py_ready()) {
        spn_ecc_enter();
        Py_BEGIN_ALLOW_THREADS
        n = spn_block_tweaks(block.buf, (size_t)block.len, spent.buf, (size_t)spent.len, &res);
        Py_END_ALLOW_THREADS
        spn_ecc_leave();
        if (n < 0) {
            spn_py_raise_code(n, "");
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
    if (spn_py_ready() && spn_py_scanner_of(scanner, &sc)) {
        ((ScannerObject *)scanner)->busy++;
        spn_ecc_enter();
        Py_BEGIN_ALLOW_THREADS
        n = spn_block_scan(block.buf, (size_t)block.len, spent.buf, (size_t)spent.len, sc, &res);
        Py_END_ALLOW_THREADS
        spn_ecc_leave();
        ((ScannerObject *)scanner)->busy--;
        if (n < 0) {
            spn_py_raise_code(n, "");
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
 * out_vouts4, out_keys32, out_values8, max_values8, taproot_keys32, spent_outpoints36, spent_keys8) */
static PyObject *py_block_index(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer block, spent;
    spn_block_index x;
    int r = 0;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*:block_index", &block, &spent)) return NULL;
    if (spn_py_ready()) {
        spn_ecc_enter();
        Py_BEGIN_ALLOW_THREADS
        r = spn_block_index_build(block.buf, (size_t)block.len, spent.buf, (size_t)spent.len, &x);
        Py_END_ALLOW_THREADS
        spn_ecc_leave();
        if (r != 1) {
            spn_py_raise_code(r, "");
        } else {
#define SIZED(p, n) (const char *)(p), (Py_ssize_t)(n)
            out = Py_BuildValue("(y#y#kny#y#y#y#y#y#y#y#y#y#y#)", SIZED(x.hash32, 32), SIZED(x.prev32, 32),
                                (unsigned long)x.time, (Py_ssize_t)x.block_txs, SIZED(x.txids32, 32 * x.n_tx),
                                SIZED(x.tweaks33, 33 * x.n_tx), SIZED(x.tweaks64, 64 * x.n_tx),
                                SIZED(x.out_counts4, 4 * x.n_tx), SIZED(x.out_vouts4, 4 * x.n_out),
                                SIZED(x.out_keys32, 32 * x.n_out), SIZED(x.out_values8, 8 * x.n_out),
                                SIZED(x.max_values8, 8 * x.n_tx), SIZED(x.taproot_keys32, 32 * x.n_keys),
                                SIZED(x.spent_outpoints36, 36 * x.n_spent), SIZED(x.spent_keys8, 8 * x.n_spent));
#undef SIZED
            spn_block_index_free(&x);
        }
    }
    PyBuffer_Release(&block);
    PyBuffer_Release(&spent);
    return out;
}

/* mark_spent(found, bitmaps) -> marks: for each item of the list `found` that is not None (height << 32 |
 * ordinal), set bit `ordinal` of the bytearray bitmaps[height] unless it is set; the marks made, in order, as
 * u32 LE (height, ordinal) pairs. Public data only. */
static PyObject *py_mark_spent(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *found, *bitmaps, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!O!:mark_spent", &PyList_Type, &found, &PyDict_Type, &bitmaps)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(found), made = 0, size = 0;
    unsigned char *marks = PyMem_Malloc(8 * (size_t)(n > 0 ? n : 1)), *bits = NULL;
    if (marks == NULL) return PyErr_NoMemory();
    uint64_t last = UINT64_MAX;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(found, i);
        if (item == Py_None) continue;
        uint64_t at = PyLong_AsUnsignedLongLong(item);
        if (at == (uint64_t)-1 && PyErr_Occurred()) goto done;
        uint64_t height = at >> 32;
        uint32_t ordinal = (uint32_t)at;
        if (height != last) {
            PyObject *key = PyLong_FromUnsignedLongLong(height), *bitmap;
            if (key == NULL) goto done;
            bitmap = PyDict_GetItemWithError(bitmaps, key);
            if (bitmap == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
            Py_DECREF(key);
            if (bitmap == NULL) goto done;
            if (!PyByteArray_Check(bitmap)) {
                PyErr_SetString(PyExc_TypeError, "mark_spent: the bitmaps must be bytearrays");
                goto done;
            }
            bits = (unsigned char *)PyByteArray_AS_STRING(bitmap), size = PyByteArray_GET_SIZE(bitmap), last = height;
        }
        if ((Py_ssize_t)(ordinal >> 3) >= size) {
            PyErr_Format(PyExc_IndexError, "mark_spent: output %lu of block %llu is beyond its bitmap", (unsigned long)ordinal,
                         (unsigned long long)height);
            goto done;
        }
        unsigned char bit = (unsigned char)(1u << (ordinal & 7));
        if (bits[ordinal >> 3] & bit) continue; /* spent before: its first spend keeps the mark */
        bits[ordinal >> 3] |= bit;
        for (int k = 0; k < 4; k++) {
            marks[8 * made + k] = (unsigned char)(height >> 8 * k);
            marks[8 * made + 4 + k] = (unsigned char)(ordinal >> 8 * k);
        }
        made++;
    }
    out = PyBytes_FromStringAndSize((const char *)marks, 8 * made);
done:
    PyMem_Free(marks);
    return out;
}

PyMethodDef spn_py_block_methods[] = {
    {"mark_spent", py_mark_spent, METH_VARARGS, "mark_spent(found, bitmaps) -> the (height, ordinal) marks made, u32 LE pairs"},
    {"block_tweaks", py_block_tweaks, METH_VARARGS, "block_tweaks(block, spent) -> [(txid32, tweak33)]"},
    {"block_scan", py_block_scan, METH_VARARGS, "block_scan(block, spent, scanner) -> [(txid32, vout, amount, output32, tweak32, label)]"},
    {"block_index", py_block_index, METH_VARARGS, "block_index(block, spent) -> the tweak index's packed arrays of one block"},
    {NULL, NULL, 0, NULL},
};
