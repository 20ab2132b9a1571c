/* sp_scan.native._core: the Python face of the C stages. Private: only sp_scan/native/__init__.py
 * imports it, binds libsecp256k1 with init() and wraps results in the library's types. This file holds
 * init, the module's own calls and its creation; each stage's bindings are beside it (core_*_bind.c),
 * their shared helpers in core_bind.c. */
#include "core_bind.h"

#include <stdlib.h>

#include "sha256.h"

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
    if (spn_py_bound) Py_RETURN_NONE;
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
    spn_py_bound = 1;
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
    if (!spn_py_ready()) return NULL;
    return PyUnicode_FromString(spn_engine_active->name);
}

#ifdef SPN_TESTING
#include "testing_hooks.c" /* the test-only build (sp_scan.native._testcore): per-engine hooks */
#endif

static PyMethodDef methods[] = {
    {"init", py_init, METH_VARARGS, "init(addresses, errors, ec_engine): bind libsecp256k1 and the typed errors, start the EC engine."},
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
    if (!spn_py_bind_start() || !spn_py_scanner_add(m) || !spn_py_outputmap_add(m)) goto fail;
    PyMethodDef *stages[] = {spn_py_extract_methods, spn_py_scan_methods, spn_py_send_methods, spn_py_dleq_methods,
                             spn_py_block_methods, spn_py_corefiles_methods};
    for (size_t i = 0; i < sizeof stages / sizeof *stages; i++)
        if (PyModule_AddFunctions(m, stages[i]) < 0) goto fail;
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

