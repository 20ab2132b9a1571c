/* Shared parts of the _core extension's Python bindings (core_module.c and the core_*_bind.c beside
 * each stage): the typed errors init() binds, return codes turned into them, and the readers of bytes,
 * TxInputs and sender keys. A reader returns 1, or 0 with an exception set; pointers it fills borrow
 * from the Python objects the caller holds. */
#ifndef SPN_CORE_BIND_H
#define SPN_CORE_BIND_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "core.h"

/* Typed errors handed over by the door at init() (core_module.c); spn_py_bound once it ran. */
extern PyObject *E_KEY, *E_DATA, *E_BLOCK, *E_PREVOUTS, *E_SEND, *E_KEYSUM, *E_KMAX, *E_CONFIG;
extern int spn_py_bound;

/* Intern the TxInput attribute names spn_py_inputs_of reads; 0 with an exception set. */
int spn_py_bind_start(void);

/* Raise the typed error of an SPN_E* code (`what`: the SPN_EKEY message); returns NULL. */
PyObject *spn_py_raise_code(long code, const char *what);
/* 1 once init() bound libsecp256k1 and its contexts exist; else 0 with RuntimeError set. */
int spn_py_ready(void);
/* bytes or bytearray; 0 with no exception set otherwise. */
int spn_py_as_bytes(PyObject *o, const unsigned char **p, size_t *n);
/* Exactly `width` bytes, or the key error naming `name`. */
int spn_py_fixed(PyObject *o, size_t width, const unsigned char **p, const char *name);
/* bytes or bytearray as a span, or TypeError naming `name`. */
int spn_py_span_of(PyObject *o, spn_span *s, const char *name);
/* A witness sequence's count and last two items into in; *hold keeps a converted sequence alive. */
int spn_py_witness_of(PyObject *w, spn_input *in, PyObject **hold);

typedef struct {
    PyObject *seq;   /* the inputs, as a fast sequence */
    PyObject *holds; /* converted witness sequences */
    spn_input *ins;
    size_t n;
} spn_py_inputs;

void spn_py_inputs_free(spn_py_inputs *x);
/* A sequence of TxInput read into x (freed with spn_py_inputs_free, also after a failure). */
int spn_py_inputs_of(PyObject *obj, spn_py_inputs *x);

/* A sender's outpoints and (private_key32, is_taproot) input keys; the keys are wiped when freed. */
typedef struct {
    unsigned char (*outpoints)[36];
    size_t n_outpoints;
    unsigned char (*keys)[32];
    unsigned char *is_taproot;
    size_t n_keys;
} spn_py_send_args;

void spn_py_send_args_free(spn_py_send_args *a);
int spn_py_send_args_of(PyObject *outpoints, PyObject *keys, spn_py_send_args *a);

/* The Scanner type (core_scan_bind.c). */
typedef struct {
    PyObject_HEAD
    spn_scanner sc;
    int live;
    int busy; /* scans running on sc without the GIL: close() must wait for them */
} ScannerObject;

/* The live scanner in o, or 0 with TypeError (not a Scanner) or ValueError (closed). */
int spn_py_scanner_of(PyObject *o, const spn_scanner **sc);
/* Create the Scanner type and add it to the module. */
int spn_py_scanner_add(PyObject *module);
/* Create the OutputMap type (core_outputs_bind.c) and add it to the module. */
int spn_py_outputmap_add(PyObject *module);

/* Each stage's functions, added to the module at import (core_module.c). */
extern PyMethodDef spn_py_extract_methods[], spn_py_scan_methods[], spn_py_send_methods[], spn_py_dleq_methods[],
    spn_py_block_methods[], spn_py_corefiles_methods[];

#endif
