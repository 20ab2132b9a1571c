/* sp_scan.native._hash: SHA256, BIP352 tagged hashes, HASH160 and BIP158 Golomb-coded sets for Python.
 * Private; use sp_scan.native. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "gcs.h"
#include "ripemd160.h"
#include "sha256.h"

/* Inputs at least this long are hashed without the GIL. */
#define NOGIL_MIN 65536

static void sha256_once(const Py_buffer *data, unsigned char out32[32]) {
    spn_sha256 h;
    spn_sha256_init(&h);
    spn_sha256_write(&h, data->buf, (size_t)data->len);
    spn_sha256_finalize(&h, out32);
}

static PyObject *hash_sha256(PyObject *self, PyObject *arg) {
    Py_buffer data;
    unsigned char out[32];
    (void)self;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    if (data.len < NOGIL_MIN) {
        sha256_once(&data, out);
    } else {
        Py_BEGIN_ALLOW_THREADS;
        sha256_once(&data, out);
        Py_END_ALLOW_THREADS;
    }
    PyBuffer_Release(&data);
    return PyBytes_FromStringAndSize((const char *)out, 32);
}

static PyObject *hash_sha256_parts(PyObject *self, PyObject *arg) {
    spn_sha256 h;
    unsigned char out[32];
    PyObject *seq = PySequence_Fast(arg, "sha256_parts expects a sequence of buffers");
    (void)self;
    if (seq == NULL) return NULL;
    spn_sha256_init(&h);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        Py_buffer part;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &part, PyBUF_SIMPLE) < 0) {
            spn_wipe(&h, sizeof h);
            Py_DECREF(seq);
            return NULL;
        }
        spn_sha256_write(&h, part.buf, (size_t)part.len);
        PyBuffer_Release(&part);
    }
    Py_DECREF(seq);
    spn_sha256_finalize(&h, out);
    return PyBytes_FromStringAndSize((const char *)out, 32);
}

static PyObject *hash_ripemd160(PyObject *self, PyObject *arg) {
    Py_buffer data;
    unsigned char out[20];
    (void)self;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    spn_ripemd160(data.buf, (size_t)data.len, out);
    PyBuffer_Release(&data);
    return PyBytes_FromStringAndSize((const char *)out, 20);
}

static PyObject *hash_sha256_loop(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t n;
    unsigned char out[32];
    (void)self;
    if (!PyArg_ParseTuple(args, "y*n:sha256_loop", &data, &n)) return NULL;
    if (n < 1) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "n must be >= 1");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) sha256_once(&data, out);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&data);
    return PyBytes_FromStringAndSize((const char *)out, 32);
}

static PyObject *hash_tagged_hash(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long tag;
    Py_buffer msg;
    unsigned char out[32];
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "tagged_hash(tag_index, msg) takes 2 arguments");
        return NULL;
    }
    tag = PyLong_AsLong(args[0]);
    if (tag == -1 && PyErr_Occurred()) return NULL;
    if (tag != SPN_TAG_INPUTS && tag != SPN_TAG_SHARED_SECRET && tag != SPN_TAG_LABEL) {
        PyErr_SetString(PyExc_ValueError, "tag_index must be 0, 1 or 2");
        return NULL;
    }
    if (PyObject_GetBuffer(args[1], &msg, PyBUF_SIMPLE) < 0) return NULL;
    spn_tagged_sha256((int)tag, msg.buf, (size_t)msg.len, out);
    PyBuffer_Release(&msg);
    PyObject *res = PyBytes_FromStringAndSize((const char *)out, 32);
    spn_wipe(out, sizeof out);
    return res;
}

static PyObject *hash_tagged_midstate(PyObject *self, PyObject *args) {
    int tag;
    spn_sha256 h;
    unsigned char out[32];
    (void)self;
    if (!PyArg_ParseTuple(args, "i:tagged_midstate", &tag)) return NULL;
    if (tag != SPN_TAG_INPUTS && tag != SPN_TAG_SHARED_SECRET && tag != SPN_TAG_LABEL) {
        PyErr_SetString(PyExc_ValueError, "tag_index must be 0, 1 or 2");
        return NULL;
    }
    spn_sha256_init_tagged(&h, tag);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(h.s[i] >> 24);
        out[4 * i + 1] = (unsigned char)(h.s[i] >> 16);
        out[4 * i + 2] = (unsigned char)(h.s[i] >> 8);
        out[4 * i + 3] = (unsigned char)h.s[i];
    }
    return Py_BuildValue("y#K", (const char *)out, (Py_ssize_t)32, (unsigned long long)h.bytes);
}

static PyObject *hash_hash160(PyObject *self, PyObject *arg) {
    Py_buffer data;
    unsigned char out[20];
    (void)self;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    if (data.len == 33) {
        spn_hash160_33(data.buf, out);
    } else {
        spn_hash160(data.buf, (size_t)data.len, out);
    }
    PyBuffer_Release(&data);
    return PyBytes_FromStringAndSize((const char *)out, 20);
}

static PyObject *hash_hash160_loop(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t n;
    int fast;
    unsigned char out[20];
    (void)self;
    if (!PyArg_ParseTuple(args, "y*np:hash160_loop", &data, &n, &fast)) return NULL;
    if (n < 1 || (fast && data.len != 33)) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "n must be >= 1 and fast needs 33 bytes");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fast) {
            spn_hash160_33(data.buf, out);
        } else {
            spn_hash160(data.buf, (size_t)data.len, out);
        }
    }
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&data);
    return PyBytes_FromStringAndSize((const char *)out, 20);
}

static PyObject *hash_hash160_33_many(PyObject *self, PyObject *arg) {
    Py_buffer data;
    (void)self;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    if (data.len % 33 != 0) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "hash160_33_many needs a multiple of 33 bytes");
        return NULL;
    }
    size_t n = (size_t)data.len / 33;
    const unsigned char **in33 = PyMem_Malloc((n ? n : 1) * sizeof *in33);
    PyObject *res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(20 * n));
    if (in33 == NULL || res == NULL) {
        PyMem_Free(in33);
        Py_XDECREF(res);
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    for (size_t i = 0; i < n; i++) in33[i] = (const unsigned char *)data.buf + 33 * i;
    Py_BEGIN_ALLOW_THREADS;
    spn_hash160_33_many(in33, n, (unsigned char (*)[20])PyBytes_AS_STRING(res));
    Py_END_ALLOW_THREADS;
    PyMem_Free(in33);
    PyBuffer_Release(&data);
    return res;
}

/* Items of a batch call: a sequence of buffers, or (width > 0) one buffer of n × width bytes. */
typedef struct {
    PyObject *seq;
    Py_buffer packed;
    int is_packed;
    Py_ssize_t n, width;
} item_list;

static int items_open(item_list *it, PyObject *obj, Py_ssize_t width) {
    it->seq = NULL;
    it->is_packed = 0;
    it->width = width;
    if (width > 0 && PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &it->packed, PyBUF_SIMPLE) < 0) return 0;
        if (it->packed.len % width != 0) {
            PyErr_Format(PyExc_ValueError, "packed items are %zd bytes, not a multiple of %zd", it->packed.len, width);
            PyBuffer_Release(&it->packed);
            return 0;
        }
        it->is_packed = 1;
        it->n = it->packed.len / width;
        return 1;
    }
    it->seq = PySequence_Fast(obj, "expected a sequence of buffers or one packed buffer");
    if (it->seq == NULL) return 0;
    it->n = PySequence_Fast_GET_SIZE(it->seq);
    return 1;
}

/* Item i as *view; PyBuffer_Release(view) afterwards (a no-op for a packed item). 0 with an exception set. */
static int items_get(item_list *it, Py_ssize_t i, Py_buffer *view) {
    if (it->is_packed) {
        view->obj = NULL;
        view->buf = (char *)it->packed.buf + i * it->width;
        view->len = it->width;
        return 1;
    }
    if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(it->seq, i), view, PyBUF_SIMPLE) < 0) return 0;
    if (it->width != 0 && view->len != it->width) {
        PyErr_Format(PyExc_ValueError, "item %zd is %zd bytes, expected %zd", i, view->len, it->width);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static void items_close(item_list *it) {
    if (it->is_packed) PyBuffer_Release(&it->packed);
    Py_XDECREF(it->seq);
}

static int cmp_query(const void *a, const void *b) {
    const spn_gcs_query *x = a, *y = b;
    return (x->value > y->value) - (x->value < y->value);
}

/* golomb_match(key16, n, stream, items, width, p, m) -> [index of each item the set of n values holds] */
static PyObject *hash_golomb_match(PyObject *self, PyObject *args) {
    Py_buffer key, stream;
    PyObject *obj, *res = NULL;
    item_list items;
    Py_ssize_t width;
    unsigned long long n, m;
    int p, ok = 1;
    spn_gcs_query *queries = NULL;
    unsigned char *hit = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Ky*OniK:golomb_match", &key, &n, &stream, &obj, &width, &p, &m)) return NULL;
    if (key.len != 16 || width < 0 || p < 1 || p > 32 || m < 1) {
        PyBuffer_Release(&key);
        PyBuffer_Release(&stream);
        PyErr_SetString(PyExc_ValueError, "golomb_match needs a 16-byte key, width >= 0, 1 <= p <= 32, m >= 1");
        return NULL;
    }
    if (!items_open(&items, obj, width)) {
        PyBuffer_Release(&key);
        PyBuffer_Release(&stream);
        return NULL;
    }
    if (n > UINT64_MAX / m || n > (uint64_t)stream.len * 8 / (uint64_t)(p + 1)) {
        PyErr_SetString(PyExc_ValueError, "the filter holds fewer bits than its count of values needs");
        goto done;
    }
    queries = PyMem_Malloc((size_t)(items.n ? items.n : 1) * sizeof *queries);
    hit = PyMem_Calloc((size_t)(items.n ? items.n : 1), 1);
    if (queries == NULL || hit == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < items.n; i++) {
        Py_buffer item;
        if (!items_get(&items, i, &item)) goto done;
        queries[i].value = spn_gcs_map(spn_siphash24(key.buf, item.buf, (size_t)item.len), (uint64_t)n * m);
        queries[i].index = (size_t)i;
        PyBuffer_Release(&item);
    }
    Py_BEGIN_ALLOW_THREADS;
    qsort(queries, (size_t)items.n, sizeof *queries, cmp_query);
    ok = spn_gcs_match(stream.buf, (size_t)stream.len, n, p, queries, (size_t)items.n, hit);
    Py_END_ALLOW_THREADS;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "the filter's bit stream ends before its count of values");
        goto done;
    }
    res = PyList_New(0);
    for (Py_ssize_t i = 0; res && i < items.n; i++) {
        if (!hit[i]) continue;
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL || PyList_Append(res, index) < 0) Py_CLEAR(res);
        Py_XDECREF(index);
    }
done:
    PyMem_Free(queries);
    PyMem_Free(hit);
    items_close(&items);
    PyBuffer_Release(&key);
    PyBuffer_Release(&stream);
    return res;
}

static PyObject *hash_golomb_set(PyObject *self, PyObject *args) {
    Py_buffer key;
    PyObject *obj, *res = NULL;
    item_list items;
    Py_ssize_t width, n;
    int p;
    unsigned long long m;
    uint64_t *vals = NULL, f;
    unsigned char prefix[9];
    size_t nprefix, nstream = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*OniK:golomb_set", &key, &obj, &width, &p, &m)) return NULL;
    if (key.len != 16 || width < 0 || p < 1 || p > 32 || m < 1) {
        PyBuffer_Release(&key);
        PyErr_SetString(PyExc_ValueError, "golomb_set needs a 16-byte key, width >= 0, 1 <= p <= 32, m >= 1");
        return NULL;
    }
    if (!items_open(&items, obj, width)) {
        PyBuffer_Release(&key);
        return NULL;
    }
    n = items.n;
    if ((uint64_t)n > UINT64_MAX / m) {
        PyErr_SetString(PyExc_ValueError, "golomb_set: too many items");
        goto done;
    }
    f = (uint64_t)n * m;
    vals = PyMem_Malloc(2 * (size_t)(n ? n : 1) * sizeof *vals);
    if (vals == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_buffer item;
        if (!items_get(&items, i, &item)) goto done;
        vals[i] = spn_gcs_map(spn_siphash24(key.buf, item.buf, (size_t)item.len), f);
        PyBuffer_Release(&item);
    }
    Py_BEGIN_ALLOW_THREADS;
    spn_gcs_sort(vals, vals + n, (size_t)n);
    nstream = spn_gcs_encoded_size(vals, (size_t)n, p);
    Py_END_ALLOW_THREADS;
    if ((uint64_t)n < 0xfd) {
        prefix[0] = (unsigned char)n;
        nprefix = 1;
    } else {
        int width_n = (uint64_t)n <= 0xffff ? 2 : (uint64_t)n <= 0xffffffffULL ? 4 : 8;
        prefix[0] = width_n == 2 ? 0xfd : width_n == 4 ? 0xfe : 0xff;
        for (int b = 0; b < width_n; b++) prefix[1 + b] = (unsigned char)((uint64_t)n >> (8 * b));
        nprefix = 1 + (size_t)width_n;
    }
    res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(nprefix + nstream));
    if (res == NULL) goto done;
    memcpy(PyBytes_AS_STRING(res), prefix, nprefix);
    Py_BEGIN_ALLOW_THREADS;
    spn_gcs_encode(vals, (size_t)n, p, (unsigned char *)PyBytes_AS_STRING(res) + nprefix);
    Py_END_ALLOW_THREADS;
done:
    PyMem_Free(vals);
    items_close(&items);
    PyBuffer_Release(&key);
    return res;
}

static PyObject *hash_spent_hashes(PyObject *self, PyObject *args) {
    Py_buffer block_hash;
    PyObject *obj, *res = NULL;
    item_list items;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O:spent_hashes", &block_hash, &obj)) return NULL;
    if (block_hash.len != 32) {
        PyBuffer_Release(&block_hash);
        PyErr_SetString(PyExc_ValueError, "spent_hashes needs a 32-byte block hash");
        return NULL;
    }
    if (!items_open(&items, obj, 36)) {
        PyBuffer_Release(&block_hash);
        return NULL;
    }
    res = PyList_New(items.n);
    if (res == NULL) goto done;
    for (Py_ssize_t i = 0; i < items.n; i++) {
        Py_buffer outpoint;
        spn_sha256 h;
        unsigned char digest[32];
        PyObject *item;
        if (!items_get(&items, i, &outpoint)) goto fail;
        spn_sha256_init(&h);
        spn_sha256_write(&h, outpoint.buf, 36);
        spn_sha256_write(&h, block_hash.buf, 32);
        spn_sha256_finalize(&h, digest);
        PyBuffer_Release(&outpoint);
        item = PyBytes_FromStringAndSize((const char *)digest, 8);
        if (item == NULL) goto fail;
        PyList_SET_ITEM(res, i, item);
    }
    goto done;
fail:
    Py_CLEAR(res);
done:
    items_close(&items);
    PyBuffer_Release(&block_hash);
    return res;
}

static PyObject *hash_hash160_impl(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyUnicode_FromString(spn_hash160_impl());
}

static PyObject *hash_impl(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyUnicode_FromString(spn_sha256_impl());
}

static PyObject *hash_select(PyObject *self, PyObject *args) {
    int force_portable;
    (void)self;
    if (!PyArg_ParseTuple(args, "p:select", &force_portable)) return NULL;
    spn_sha256_select(force_portable);
    return PyUnicode_FromString(spn_sha256_impl());
}

static PyMethodDef methods[] = {
    {"sha256", hash_sha256, METH_O, "sha256(data) -> 32-byte digest."},
    {"sha256_parts", hash_sha256_parts, METH_O, "sha256_parts(parts) -> digest of the parts written in turn (tests)."},
    {"sha256_loop", hash_sha256_loop, METH_VARARGS, "sha256_loop(data, n) -> digest; hashes data n times (bench)."},
    {"tagged_hash", (PyCFunction)(void (*)(void))hash_tagged_hash, METH_FASTCALL,
     "tagged_hash(tag_index, msg) -> 32 bytes; tag_index 0 Inputs, 1 SharedSecret, 2 Label. Raises ValueError."},
    {"tagged_midstate", hash_tagged_midstate, METH_VARARGS,
     "tagged_midstate(tag_index) -> (32-byte big-endian state, bytes absorbed); for tests."},
    {"hash160", hash_hash160, METH_O, "hash160(data) -> 20 bytes RIPEMD160(SHA256(data))."},
    {"hash160_loop", hash_hash160_loop, METH_VARARGS,
     "hash160_loop(data, n, fast) -> digest; n times, fast uses the 33-byte path (bench)."},
    {"ripemd160", hash_ripemd160, METH_O, "ripemd160(data) -> 20-byte digest."},
    {"hash160_33_many", hash_hash160_33_many, METH_O,
     "hash160_33_many(keys) -> HASH160 of each 33-byte slice of keys, concatenated. Raises ValueError."},
    {"golomb_match", hash_golomb_match, METH_VARARGS,
     "golomb_match(key16, n, stream, items, width, p, m) -> the indices of the items the Golomb-coded set of n values holds"},
    {"golomb_set", hash_golomb_set, METH_VARARGS,
     "golomb_set(key16, items, width, p, m) -> CompactSize(N) || Golomb-Rice stream of the sorted SipHash-2-4 "
     "items mapped into [0, N*m) (BIP158); width 0 allows any length; with width > 0 items may be one packed "
     "buffer of N*width bytes. Raises ValueError (bad key or parameters, an item of another width)."},
    {"spent_hashes", hash_spent_hashes, METH_VARARGS,
     "spent_hashes(block_hash32, outpoints36) -> [SHA256(outpoint || block_hash)[:8], ...] (BlindBit spent index); "
     "outpoints a sequence or one packed buffer of n*36 bytes. Raises ValueError (wrong widths)."},
    {"hash160_impl", hash_hash160_impl, METH_NOARGS, "hash160_impl() -> 'avx2' or 'portable' (RIPEMD160 lanes)."},
    {"impl", hash_impl, METH_NOARGS, "impl() -> 'shani', 'armv8' or 'portable'."},
    {"select", hash_select, METH_VARARGS,
     "select(force_portable) -> impl name; re-picks this module's SHA256 compression and AVX2 use (honors SP_SCAN_SHA256)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hash", "SHA256, BIP352 tagged hashes, HASH160, BIP158 Golomb-coded sets (private).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__hash(void) {
    spn_sha256_select(0);
    return PyModule_Create(&module);
}
