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

PyMethodDef spn_py_block_methods[] = {
    {"block_tweaks", py_block_tweaks, METH_VARARGS, "block_tweaks(block, spent) -> [(txid32, tweak33)]"},
    {"block_scan", py_block_scan, METH_VARARGS, "block_scan(block, spent, scanner) -> [(txid32, vout, amount, output32, tweak32, label)]"},
    {"block_index", py_block_index, METH_VARARGS, "block_index(block, spent) -> the tweak index's packed arrays of one block"},
    {NULL, NULL, 0, NULL},
};
