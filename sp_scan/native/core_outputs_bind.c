/* Python bindings of the index writer's output map (core_outputs.c): the OutputMap type. Places cross the
 * boundary as u64 LE height << 32 | ordinal. */
#include "core_bind.h"
#include "core_outputs.h"

#include <stdlib.h>

typedef struct {
    PyObject_HEAD
    spn_outmap map;
    int busy; /* a spend runs on map without the GIL: no other call may touch it meanwhile */
} OutputMapObject;

static PyTypeObject *OutputMapType;

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le64(unsigned char *p, uint64_t v) {
    for (int k = 0; k < 8; k++) p[k] = (unsigned char)(v >> 8 * k);
}

static void OutputMap_dealloc(OutputMapObject *self) {
    spn_outmap_free(&self->map);
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *OutputMap_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *key;
    const unsigned char *key16;
    static char *kwlist[] = {"key16", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:OutputMap", kwlist, &key)) return NULL;
    if (!spn_py_fixed(key, 16, &key16, "key16")) return NULL;
    OutputMapObject *self = (OutputMapObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    if (!spn_outmap_init(&self->map, key16)) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

/* A block's outputs: txids (n x 32), counts (n x u32 LE), vouts (k x u32 LE), checked against each other. */
typedef struct {
    Py_buffer txids, counts, vouts;
    size_t n, outputs;
} block_outputs;

static void block_outputs_release(block_outputs *b) {
    PyBuffer_Release(&b->txids);
    PyBuffer_Release(&b->counts);
    PyBuffer_Release(&b->vouts);
}

static int block_outputs_check(block_outputs *b, const char *fn) {
    if (b->txids.len % 32 || b->counts.len != b->txids.len / 8 || b->vouts.len % 4) {
        PyErr_Format(PyExc_ValueError, "%s: txids (n x 32), counts (n x 4) and vouts (k x 4) do not fit", fn);
        return 0;
    }
    b->n = (size_t)b->txids.len / 32;
    b->outputs = 0;
    for (size_t i = 0; i < b->n; i++) b->outputs += le32((const unsigned char *)b->counts.buf + 4 * i);
    if (b->outputs != (size_t)b->vouts.len / 4) {
        PyErr_Format(PyExc_ValueError, "%s: the counts add up to %zu outputs, vouts holds %zd", fn, b->outputs, b->vouts.len / 4);
        return 0;
    }
    if (b->outputs > (size_t)SPN_OUTMAP_MAX_ORDINAL + 1) {
        PyErr_Format(PyExc_ValueError, "%s: a block of more than 2^24 outputs", fn);
        return 0;
    }
    return 1;
}

/* 1 unless a spend runs on the map without the GIL (then RuntimeError). */
static int idle(const OutputMapObject *self, const char *fn) {
    if (self->busy) {
        PyErr_Format(PyExc_RuntimeError, "%s: the map is in use by another thread", fn);
        return 0;
    }
    return 1;
}

static int height_of(unsigned long height, const char *fn) {
    if (height > SPN_OUTMAP_MAX_HEIGHT) {
        PyErr_Format(PyExc_ValueError, "%s: height %lu is beyond 2^24 - 1", fn, height);
        return 0;
    }
    return 1;
}

/* The outpoint of output o (vout at `vouts`) of the tx whose txid is at `txid32`. */
static void outpoint_at(unsigned char outpoint36[36], const unsigned char *txid32, const unsigned char *vout4) {
    memcpy(outpoint36, txid32, 32);
    memcpy(outpoint36 + 32, vout4, 4);
}

/* Block `height`'s outputs put in the map, but those set in `bits` (NULL: none); the outputs added (not
 * held before), or -1 out of memory. Runs without the GIL. */
static Py_ssize_t add_block(spn_outmap *map, unsigned long height, const block_outputs *b, const unsigned char *bits) {
    const unsigned char *txids = b->txids.buf, *counts = b->counts.buf, *vouts = b->vouts.buf;
    unsigned char outpoint36[36];
    Py_ssize_t added = 0;
    size_t o = 0;
    for (size_t i = 0; i < b->n; i++) {
        for (uint32_t k = le32(counts + 4 * i); k > 0; k--, o++) {
            if (bits != NULL && bits[o >> 3] >> (o & 7) & 1) continue;
            outpoint_at(outpoint36, txids + 32 * i, vouts + 4 * o);
            int r = spn_outmap_put(map, spn_outmap_identify(map, outpoint36, 0), (uint32_t)height, (uint32_t)o);
            if (r < 0) return -1;
            added += r;
        }
    }
    return added;
}

static PyObject *OutputMap_add_block(OutputMapObject *self, PyObject *args) {
    unsigned long height;
    block_outputs b = {0};
    Py_buffer spent = {0};
    Py_ssize_t added = 0;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "ky*y*y*y*:add_block", &height, &b.txids, &b.counts, &b.vouts, &spent)) goto done;
    if (!idle(self, "add_block") || !height_of(height, "add_block") || !block_outputs_check(&b, "add_block")) goto done;
    if (spent.len != 0 && (size_t)spent.len != (b.outputs + 7) / 8) {
        PyErr_Format(PyExc_ValueError, "add_block: spent holds %zd bytes for %zu outputs", spent.len, b.outputs);
        goto done;
    }
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    added = add_block(&self->map, height, &b, spent.len != 0 ? spent.buf : NULL);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (added < 0) {
        PyErr_NoMemory();
        goto done;
    }
    out = PyLong_FromSsize_t(added);
done:
    block_outputs_release(&b);
    PyBuffer_Release(&spent);
    return out;
}

static PyObject *OutputMap_drop_block(OutputMapObject *self, PyObject *args) {
    unsigned long height;
    block_outputs b = {0};
    Py_ssize_t dropped = 0;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "ky*y*y*:drop_block", &height, &b.txids, &b.counts, &b.vouts)) goto done;
    if (!idle(self, "drop_block") || !height_of(height, "drop_block") || !block_outputs_check(&b, "drop_block")) goto done;
    const unsigned char *txids = b.txids.buf, *counts = b.counts.buf, *vouts = b.vouts.buf;
    unsigned char outpoint36[36];
    size_t o = 0;
    for (size_t i = 0; i < b.n; i++) {
        for (uint32_t k = le32(counts + 4 * i); k > 0; k--, o++) {
            outpoint_at(outpoint36, txids + 32 * i, vouts + 4 * o);
            dropped += spn_outmap_drop(&self->map, spn_outmap_identify(&self->map, outpoint36, 0), (uint32_t)height);
        }
    }
    out = PyLong_FromSsize_t(dropped);
done:
    block_outputs_release(&b);
    return out;
}

static int place_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Block `height`'s outputs added, then every output an outpoint names taken out: its own bitmap set in
 * bits[(outputs + 7) / 8], the places taken in places[0..*taken) ascending. Each pass identifies its
 * outpoints first (prefetching their slots), then looks them up. 1, or 0 out of memory. */
static int spend_block(spn_outmap *map, unsigned long height, const block_outputs *b, const unsigned char *in, size_t k,
                       unsigned char *bits, uint64_t *places, size_t *taken) {
    const unsigned char *txids = b->txids.buf, *counts = b->counts.buf, *vouts = b->vouts.buf;
    spn_outmap_id *ids = malloc((b->outputs > k ? b->outputs : k) * sizeof *ids + 1);
    unsigned char outpoint36[36];
    size_t o = 0;
    if (ids == NULL) return 0;
    for (size_t i = 0; i < b->n; i++) {
        for (uint32_t c = le32(counts + 4 * i); c > 0; c--, o++) {
            outpoint_at(outpoint36, txids + 32 * i, vouts + 4 * o);
            ids[o] = spn_outmap_identify(map, outpoint36, 1);
        }
    }
    for (o = 0; o < b->outputs; o++) {
        if (spn_outmap_put(map, ids[o], (uint32_t)height, (uint32_t)o) < 0) {
            free(ids);
            return 0;
        }
    }
    for (size_t i = 0; i < k; i++) ids[i] = spn_outmap_identify(map, in + 36 * i, 1);
    *taken = 0;
    for (size_t i = 0; i < k; i++) {
        uint32_t h, ordinal;
        if (!spn_outmap_take(map, ids[i], &h, &ordinal)) continue;
        if (h == height) bits[ordinal >> 3] |= (unsigned char)(1u << (ordinal & 7));
        places[(*taken)++] = (uint64_t)h << 32 | ordinal;
    }
    free(ids);
    qsort(places, *taken, sizeof *places, place_cmp);
    return 1;
}

/* spend(height, txids, counts, vouts, outpoints36) -> (own, places): add block `height`'s outputs, then take
 * out every output an outpoint names; `own` is the block's bitmap of its own outputs taken, `places` the
 * places taken, ascending, as u64 LE (height << 32 | ordinal). The GIL is released meanwhile. */
static PyObject *OutputMap_spend(OutputMapObject *self, PyObject *args) {
    unsigned long height;
    block_outputs b = {0};
    Py_buffer in = {0};
    uint64_t *places = NULL;
    unsigned char *bits = NULL;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "ky*y*y*y*:spend", &height, &b.txids, &b.counts, &b.vouts, &in)) goto done;
    if (!height_of(height, "spend") || !block_outputs_check(&b, "spend")) goto done;
    if (in.len % 36) {
        PyErr_SetString(PyExc_ValueError, "spend: outpoints36 must be k x 36 bytes");
        goto done;
    }
    if (!idle(self, "spend")) goto done;
    size_t k = (size_t)in.len / 36, taken = 0, nbits = (b.outputs + 7) / 8;
    bits = PyMem_Calloc(nbits ? nbits : 1, 1);
    places = PyMem_Malloc(8 * (k ? k : 1));
    if (bits == NULL || places == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int ok;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    ok = spend_block(&self->map, height, &b, in.buf, k, bits, places, &taken);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (!ok) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *own = PyBytes_FromStringAndSize((const char *)bits, (Py_ssize_t)nbits);
    PyObject *packed = own ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * taken)) : NULL;
    if (packed != NULL) {
        for (size_t i = 0; i < taken; i++) put_le64((unsigned char *)PyBytes_AS_STRING(packed) + 8 * i, places[i]);
        out = PyTuple_Pack(2, own, packed);
    }
    Py_XDECREF(own);
    Py_XDECREF(packed);
done:
    block_outputs_release(&b);
    PyBuffer_Release(&in);
    PyMem_Free(places);
    PyMem_Free(bits);
    return out;
}

static PyObject *OutputMap_put(OutputMapObject *self, PyObject *args) {
    Py_buffer in = {0}, at = {0};
    PyObject *out = NULL;
    Py_ssize_t added = 0;
    if (!PyArg_ParseTuple(args, "y*y*:put", &in, &at) || !idle(self, "put")) goto done;
    if (in.len % 36 || at.len != in.len / 36 * 8) {
        PyErr_SetString(PyExc_ValueError, "put: outpoints36 (k x 36) and places (k x u64) do not fit");
        goto done;
    }
    for (Py_ssize_t i = 0; i < in.len / 36; i++) {
        const unsigned char *p = (const unsigned char *)at.buf + 8 * i;
        uint32_t ordinal = le32(p), height = le32(p + 4);
        if (height > SPN_OUTMAP_MAX_HEIGHT || ordinal > SPN_OUTMAP_MAX_ORDINAL) {
            PyErr_Format(PyExc_ValueError, "put: place (%lu, %lu) is beyond 2^24 - 1", (unsigned long)height, (unsigned long)ordinal);
            goto done;
        }
        int r = spn_outmap_put(&self->map, spn_outmap_identify(&self->map, (const unsigned char *)in.buf + 36 * i, 0), height, ordinal);
        if (r < 0) {
            PyErr_NoMemory();
            goto done;
        }
        added += r;
    }
    out = PyLong_FromSsize_t(added);
done:
    PyBuffer_Release(&in);
    PyBuffer_Release(&at);
    return out;
}

static Py_ssize_t OutputMap_len(OutputMapObject *self) {
    return (Py_ssize_t)self->map.count;
}

static PyObject *OutputMap_nbytes(OutputMapObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(sizeof(spn_outmap_slot) * (self->map.mask + 1));
}

static PyMethodDef OutputMap_methods[] = {
    {"add_block", (PyCFunction)OutputMap_add_block, METH_VARARGS,
     "add_block(height, txids, counts, vouts, spent) -> outputs added (those not spent, not held before)"},
    {"drop_block", (PyCFunction)OutputMap_drop_block, METH_VARARGS, "drop_block(height, txids, counts, vouts) -> outputs removed"},
    {"spend", (PyCFunction)OutputMap_spend, METH_VARARGS,
     "spend(height, txids, counts, vouts, outpoints36) -> (own spends bitmap, the places taken: ascending u64 LE)"},
    {"put", (PyCFunction)OutputMap_put, METH_VARARGS, "put(outpoints36, places) -> outpoints added"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef OutputMap_getset[] = {
    {"nbytes", (getter)OutputMap_nbytes, NULL, "bytes of memory the map's slots take", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot outputmap_slots[] = {
    {Py_tp_dealloc, OutputMap_dealloc},
    {Py_tp_new, OutputMap_new},
    {Py_tp_methods, OutputMap_methods},
    {Py_tp_getset, OutputMap_getset},
    {Py_sq_length, OutputMap_len},
    {Py_tp_doc, "OutputMap(key16): outpoint -> (height, ordinal) of the unspent taproot outputs an index writer tracks."},
    {0, NULL},
};

static PyType_Spec outputmap_spec = {"_core.OutputMap", sizeof(OutputMapObject), 0, Py_TPFLAGS_DEFAULT, outputmap_slots};

int spn_py_outputmap_add(PyObject *module) {
    if (!(OutputMapType = (PyTypeObject *)PyType_FromSpec(&outputmap_spec))) return 0;
    return PyModule_AddObjectRef(module, "OutputMap", (PyObject *)OutputMapType) == 0;
}
