/*
 * librdkafka → Arrow buffers, with no Python object per record.
 *
 * One Reader owns one librdkafka consumer assigned to (at most) one partition. read()
 * consumes with the GIL released and fills Arrow-layout buffers (int32 offsets + data +
 * validity bitmap for key, value and headers; int64 offsets and timestamps; int32
 * timestamp types), returned as bytes for pyarrow.Array.from_buffers. A read stops by
 * offset, never by a count of records: transactional and compacted topics have gaps.
 *
 * librdkafka is not linked: load(path) dlopen()s the copy confluent-kafka already loaded and
 * resolves the functions of _rdkafka_api.h, so one librdkafka serves the whole process and
 * the build needs only a C compiler and Python's headers (docs/design.md, "Native Kafka reader: one librdkafka").
 *
 * The Python side is jetspark.datasources.kafka.native.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "_rdkafka_api.h"
#include "growable_buffer.h"

/* One function pointer per librdkafka function, named as in rdkafka.h; set by load(). */
#define RDK_POINTER(ret, name, params) static ret(*name) params;
RDKAFKA_FUNCTIONS(RDK_POINTER)
#undef RDK_POINTER

#define RDK_ENTRY(ret, name, params) {#name, (void **)&name},
static const struct {
    const char *name;
    void **slot;
} rdk_table[] = {RDKAFKA_FUNCTIONS(RDK_ENTRY)};
#undef RDK_ENTRY

static void *rdk_handle;   /* dlopen() handle of the loaded librdkafka; NULL: not loaded */
static char *rdk_path;     /* its path, as given to load() */

static int check_loaded(void) {
    if (!rdk_handle) {
        PyErr_SetString(PyExc_RuntimeError, "librdkafka is not loaded: call _kafka_arrow.load(path) first");
        return -1;
    }
    return 0;
}

#if PY_VERSION_HEX >= 0x030D0000
#define interpreter_finalizing() Py_IsFinalizing()
#else
#define interpreter_finalizing() _Py_IsFinalizing()
#endif

#define BATCH 1024                 /* messages popped from librdkafka's queue at once */
#define MAX_DATA ((size_t)1 << 30) /* stop a chunk at 1 GiB of one column: int32 offsets */
/* Stop a chunk at this many bytes of all its buffers: keys, values, header names and values,
 * and every offset, validity and timestamp buffer, so a record of many empty header entries
 * (8 bytes of offsets each, no data) counts too. read(max_bytes=) may ask for less. */
#define MAX_CHUNK_BYTES ((size_t)1 << 30)
/* The most data bytes of a binary column: its offsets are int32. A record that would take a
 * column past it starts the next chunk (the fuzz build lowers it to reach that path). */
#ifndef MAX_OFFSET
#define MAX_OFFSET ((size_t)INT32_MAX)
#endif

/* ---------------------------------------------------------------- growable buffers */

/* A validity bitmap (bit set = valid), LSB first as Arrow lays it out. */
typedef struct {
    Buf bits;
    int64_t n, nulls;
} Validity;

static int validity_put(Validity *v, int valid) {
    if ((v->n & 7) == 0) {
        uint8_t zero = 0;
        if (buf_put(&v->bits, &zero, 1))
            return -1;
    }
    if (valid)
        ((uint8_t *)v->bits.p)[v->n >> 3] |= (uint8_t)(1u << (v->n & 7));
    else
        v->nulls++;
    v->n++;
    return 0;
}

/* A binary (or utf8) column: validity, int32 offsets, data. */
typedef struct {
    Validity valid;
    Buf offsets, data;
} BinCol;

static int bincol_init(BinCol *c) {
    int32_t zero = 0;
    return buf_put(&c->offsets, &zero, sizeof zero);
}

static int bincol_put(BinCol *c, const void *p, size_t n) {
    if (validity_put(&c->valid, p != NULL))
        return -1;
    if (p && buf_put(&c->data, p, n))
        return -1;
    int32_t end = (int32_t)c->data.len;
    return buf_put(&c->offsets, &end, sizeof end);
}

static void bincol_free(BinCol *c) {
    buf_free(&c->valid.bits);
    buf_free(&c->offsets);
    buf_free(&c->data);
}

/* (validity bytes or None, offsets bytes, data bytes, null count) */
static PyObject *bincol_tuple(const BinCol *c) {
    PyObject *valid;
    if (c->valid.nulls) {
        valid = buf_bytes(&c->valid.bits);
    } else {
        valid = Py_None;
        Py_INCREF(valid);
    }
    return Py_BuildValue("(NNNL)", valid, buf_bytes(&c->offsets), buf_bytes(&c->data),
                         (long long)c->valid.nulls);
}

/* ---------------------------------------------------------------- one chunk */

typedef struct {
    int64_t n;
    BinCol key, value;
    Buf offset, timestamp, ts_type;
    int headers;
    Validity hvalid;    /* per record: headers present */
    Buf hoffsets;       /* int32 list offsets into the header entries */
    BinCol hkey, hval;  /* header entries */
    size_t max_bytes;   /* stop once the buffers hold this many bytes (checked between records) */
    int64_t eof_at;     /* -1: none */
    int past_end;
    rd_kafka_resp_err_t err;
    char errstr[512];
} Chunk;

static int chunk_init(Chunk *c, int headers) {
    memset(c, 0, sizeof *c);
    c->headers = headers;
    c->eof_at = -1;
    if (bincol_init(&c->key) || bincol_init(&c->value))
        return -1;
    if (headers) {
        int32_t zero = 0;
        if (buf_put(&c->hoffsets, &zero, sizeof zero) || bincol_init(&c->hkey) || bincol_init(&c->hval))
            return -1;
    }
    return 0;
}

static void chunk_free(Chunk *c) {
    bincol_free(&c->key);
    bincol_free(&c->value);
    buf_free(&c->offset);
    buf_free(&c->timestamp);
    buf_free(&c->ts_type);
    buf_free(&c->hvalid.bits);
    buf_free(&c->hoffsets);
    bincol_free(&c->hkey);
    bincol_free(&c->hval);
}

static int chunk_put_headers(Chunk *c, rd_kafka_message_t *m) {
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
        hdrs = NULL;
    if (validity_put(&c->hvalid, hdrs != NULL))
        return -1;
    if (hdrs) {
        const char *name;
        const void *val;
        size_t size;
        for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
             i++) {
            if (bincol_put(&c->hkey, name, strlen(name)) || bincol_put(&c->hval, val, size))
                return -1;
        }
    }
    int32_t end = (int32_t)c->hkey.valid.n;
    return buf_put(&c->hoffsets, &end, sizeof end);
}

static int chunk_put(Chunk *c, rd_kafka_message_t *m) {
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(m, &tstype);
    /* Spark's Kafka timestampType: -1 none, 0 create time, 1 log-append time */
    int32_t type = (int32_t)tstype - 1;
    int64_t offset = m->offset;
    if (bincol_put(&c->key, m->key, m->key_len) || bincol_put(&c->value, m->payload, m->len) ||
        buf_put(&c->offset, &offset, sizeof offset) || buf_put(&c->timestamp, &ts, sizeof ts) ||
        buf_put(&c->ts_type, &type, sizeof type))
        return -1;
    if (c->headers && chunk_put_headers(c, m))
        return -1;
    c->n++;
    return 0;
}

/* Whether the record's key, value and header bytes keep every int32 offset of the chunk in range. */
static int chunk_fits(const Chunk *c, rd_kafka_message_t *m) {
    if (m->key_len > MAX_OFFSET - c->key.data.len || m->len > MAX_OFFSET - c->value.data.len)
        return 0;
    rd_kafka_headers_t *hdrs = NULL;
    if (!c->headers || rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR || !hdrs)
        return 1;
    size_t names = 0, values = 0, size;
    const char *name;
    const void *val;
    for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; i++) {
        names += strlen(name);
        values += size;
        if (names > MAX_OFFSET - c->hkey.data.len || values > MAX_OFFSET - c->hval.data.len)
            return 0;
    }
    return 1;
}

static size_t bincol_bytes(const BinCol *b) { return b->valid.bits.len + b->offsets.len + b->data.len; }

static size_t chunk_bytes(const Chunk *c) {
    return bincol_bytes(&c->key) + bincol_bytes(&c->value) + c->offset.len + c->timestamp.len + c->ts_type.len +
           c->hvalid.bits.len + c->hoffsets.len + bincol_bytes(&c->hkey) + bincol_bytes(&c->hval);
}

static int chunk_full(const Chunk *c) {
    return (c->n > 0 && chunk_bytes(c) >= c->max_bytes) || c->key.data.len >= MAX_DATA || c->value.data.len >= MAX_DATA ||
           c->hkey.data.len >= MAX_DATA || c->hval.data.len >= MAX_DATA;
}

static PyObject *chunk_dict(const Chunk *c) {
    PyObject *headers;
    if (c->headers) {
        PyObject *valid;
        if (c->hvalid.nulls) {
            valid = buf_bytes(&c->hvalid.bits);
        } else {
            valid = Py_None;
            Py_INCREF(valid);
        }
        headers = Py_BuildValue("{s:N,s:N,s:L,s:N,s:N}", "validity", valid, "offsets", buf_bytes(&c->hoffsets),
                                "nulls", (long long)c->hvalid.nulls, "key", bincol_tuple(&c->hkey), "value",
                                bincol_tuple(&c->hval));
    } else {
        headers = Py_None;
        Py_INCREF(headers);
    }
    PyObject *eof_at = c->eof_at >= 0 ? PyLong_FromLongLong(c->eof_at) : (Py_INCREF(Py_None), Py_None);
    PyObject *error = c->err ? PyUnicode_DecodeUTF8(c->errstr, (Py_ssize_t)strlen(c->errstr), "replace")
                             : (Py_INCREF(Py_None), Py_None);
    return Py_BuildValue("{s:L,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:O,s:i,s:N}", "rows", (long long)c->n, "key",
                         bincol_tuple(&c->key), "value", bincol_tuple(&c->value), "offset", buf_bytes(&c->offset),
                         "timestamp", buf_bytes(&c->timestamp), "timestamp_type", buf_bytes(&c->ts_type),
                         "headers", headers, "eof_at", eof_at, "past_end", c->past_end ? Py_True : Py_False,
                         "error_code", (int)c->err, "error", error);
}

/* ---------------------------------------------------------------- Reader */

typedef struct {
    PyObject_HEAD
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    rd_kafka_message_t *pending[BATCH]; /* popped but not yet read */
    int pending_at, pending_n;
    int busy;
} Reader;

static void drop_pending(Reader *self) {
    for (int i = self->pending_at; i < self->pending_n; i++)
        rd_kafka_message_destroy(self->pending[i]);
    self->pending_at = self->pending_n = 0;
}

static int check_open(Reader *self) {
    if (!self->rk) {
        PyErr_SetString(PyExc_RuntimeError, "the Kafka reader is closed");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the Kafka reader is in use by another thread");
        return -1;
    }
    return 0;
}

static int Reader_init(Reader *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"conf", NULL};
    PyObject *conf;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!", kwlist, &PyDict_Type, &conf) || check_loaded())
        return -1;
    if (self->rk) {
        PyErr_SetString(PyExc_RuntimeError, "Reader.__init__ called twice");
        return -1;
    }
    char errstr[512];
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(conf, &pos, &k, &v)) {
        const char *ks = PyUnicode_AsUTF8(k), *vs = ks ? PyUnicode_AsUTF8(v) : NULL;
        if (!ks || !vs) {
            rd_kafka_conf_destroy(kc);
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_TypeError, "conf keys and values must be str");
            }
            return -1;
        }
        if (rd_kafka_conf_set(kc, ks, vs, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(kc);
            PyErr_Format(PyExc_ValueError, "librdkafka setting %s: %s", ks, errstr);
            return -1;
        }
    }
    rd_kafka_t *rk;
    Py_BEGIN_ALLOW_THREADS
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, errstr, sizeof errstr);
    Py_END_ALLOW_THREADS
    if (!rk) {
        rd_kafka_conf_destroy(kc);
        PyErr_Format(PyExc_ValueError, "creating the librdkafka consumer: %s", errstr);
        return -1;
    }
    rd_kafka_poll_set_consumer(rk);
    self->rk = rk;
    self->queue = rd_kafka_queue_get_consumer(rk);
    return 0;
}

/* Destroy the consumer, with the GIL released. Reads only assign partitions and never commit,
 * so there is nothing for rd_kafka_consumer_close() to do; skipping it
 * (RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE) also skips the group coordinator round trip that
 * cannot finish when the broker is gone. */
static void reader_close(Reader *self) {
    drop_pending(self);
    if (!self->rk)
        return;
    rd_kafka_t *rk = self->rk;
    rd_kafka_queue_t *queue = self->queue;
    self->rk = NULL;
    self->queue = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (queue)
        rd_kafka_queue_destroy(queue);
    rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    Py_END_ALLOW_THREADS
}

static void Reader_dealloc(Reader *self) {
    /* While the interpreter shuts down, a destroy (which joins librdkafka's threads) must not
     * hold up the process's exit: the consumer is left to the exiting process instead. Readers
     * should be closed before that (consumers.close_pooled_consumers closes the pooled ones at exit). */
    if (self->rk && interpreter_finalizing()) {
        self->rk = NULL;
        self->queue = NULL;
        self->pending_at = self->pending_n = 0;
    }
    reader_close(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Reader_close(Reader *self, PyObject *Py_UNUSED(ignored)) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the Kafka reader is in use by another thread");
        return NULL;
    }
    reader_close(self);
    Py_RETURN_NONE;
}

static PyObject *assign_list(Reader *self, rd_kafka_topic_partition_list_t *parts) {
    rd_kafka_resp_err_t err;
    drop_pending(self);
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    err = rd_kafka_assign(self->rk, parts);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (parts)
        rd_kafka_topic_partition_list_destroy(parts);
    if (err) {
        PyErr_Format(PyExc_RuntimeError, "librdkafka assign: %s", rd_kafka_err2str(err));
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Reader_assign(Reader *self, PyObject *args) {
    const char *topic;
    int partition;
    long long offset;
    if (!PyArg_ParseTuple(args, "siL", &topic, &partition, &offset) || check_open(self))
        return NULL;
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, topic, partition)->offset = offset;
    return assign_list(self, parts);
}

static PyObject *Reader_unassign(Reader *self, PyObject *Py_UNUSED(ignored)) {
    if (check_open(self))
        return NULL;
    return assign_list(self, NULL);
}

static PyObject *Reader_watermark_offsets(Reader *self, PyObject *args) {
    const char *topic;
    int partition, timeout_ms;
    if (!PyArg_ParseTuple(args, "sii", &topic, &partition, &timeout_ms) || check_open(self))
        return NULL;
    int64_t low = -1, high = -1;
    rd_kafka_resp_err_t err;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    err = rd_kafka_query_watermark_offsets(self->rk, topic, partition, &low, &high, timeout_ms);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (err) {
        PyErr_Format(PyExc_RuntimeError, "librdkafka query_watermark_offsets: %s", rd_kafka_err2str(err));
        return NULL;
    }
    return Py_BuildValue("(LL)", (long long)low, (long long)high);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Give back the message next_message() just gave: the next read starts with it. */
static void unread(Reader *self, rd_kafka_message_t *m) {
    if (self->pending_at > 0 && self->pending[self->pending_at - 1] == m) {
        self->pending_at--;
    } else {  /* polled: nothing else is pending */
        self->pending[0] = m;
        self->pending_at = 0;
        self->pending_n = 1;
    }
}

/* The next message: a pending one, else a batch popped without waiting, else one waited
 * for until the deadline. NULL: none within the deadline; *failed set on a queue error. */
static rd_kafka_message_t *next_message(Reader *self, int64_t deadline, int *failed) {
    if (self->pending_at < self->pending_n)
        return self->pending[self->pending_at++];
    ssize_t got = rd_kafka_consume_batch_queue(self->queue, 0, self->pending, BATCH);
    if (got < 0) {
        *failed = 1;
        return NULL;
    }
    if (got == 0) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return NULL;
        return rd_kafka_consumer_poll(self->rk, (int)left);
    }
    self->pending_at = 1;
    self->pending_n = (int)got;
    return self->pending[0];
}

static void consume(Reader *self, Chunk *c, int64_t max_rows, int64_t end, int timeout_ms, int *oom) {
    int64_t deadline = now_ms() + timeout_ms;
    int failed = 0;
    while (c->n < max_rows && !chunk_full(c)) {
        rd_kafka_message_t *m = next_message(self, deadline, &failed);
        if (!m) {
            if (failed) {
                c->err = rd_kafka_last_error();
                snprintf(c->errstr, sizeof c->errstr, "consuming: %s", rd_kafka_err2str(c->err));
            }
            return;
        }
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            c->eof_at = m->offset;
            rd_kafka_message_destroy(m);
            if (c->eof_at >= end)
                break;
            continue;
        }
        if (m->err) {
            c->err = m->err;
            snprintf(c->errstr, sizeof c->errstr, "%s", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            break;
        }
        if (m->offset >= end) {
            c->past_end = 1;
            rd_kafka_message_destroy(m);
            break;
        }
        if (!chunk_fits(c, m)) {
            if (c->n > 0) {  /* the next chunk starts with it */
                unread(self, m);
                break;
            }
            c->err = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
            snprintf(c->errstr, sizeof c->errstr, "the record at offset %lld is over 2 GiB", (long long)m->offset);
            rd_kafka_message_destroy(m);
            break;
        }
        int bad = chunk_put(c, m);
        rd_kafka_message_destroy(m);
        if (bad) {
            *oom = 1;
            break;
        }
    }
    /* stopped by end, EOF at end or an error: what else was popped is not wanted */
    if (c->past_end || c->err || (c->eof_at >= end))
        drop_pending(self);
}

static PyObject *Reader_read(Reader *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"max_rows", "end_offset", "timeout_ms", "headers", "max_bytes", NULL};
    long long max_rows, end, max_bytes = (long long)MAX_CHUNK_BYTES;
    int timeout_ms, headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "LLi|pL", kwlist, &max_rows, &end, &timeout_ms, &headers,
                                     &max_bytes) ||
        check_open(self))
        return NULL;
    if (max_bytes < 1) {
        PyErr_SetString(PyExc_ValueError, "max_bytes must be at least 1");
        return NULL;
    }
    Chunk c;
    int oom = chunk_init(&c, headers) != 0;
    c.max_bytes = (size_t)max_bytes < MAX_CHUNK_BYTES ? (size_t)max_bytes : MAX_CHUNK_BYTES;
    if (!oom) {
        self->busy = 1;
        Py_BEGIN_ALLOW_THREADS
        consume(self, &c, max_rows, end, timeout_ms, &oom);
        Py_END_ALLOW_THREADS
        self->busy = 0;
    }
    PyObject *out = oom ? PyErr_NoMemory() : chunk_dict(&c);
    chunk_free(&c);
    return out;
}

static PyMethodDef Reader_methods[] = {
    {"assign", (PyCFunction)Reader_assign, METH_VARARGS,
     "assign(topic, partition, offset): read this partition from offset (drops what was popped)."},
    {"unassign", (PyCFunction)Reader_unassign, METH_NOARGS, "unassign(): stop fetching."},
    {"read", (PyCFunction)(void (*)(void))Reader_read, METH_VARARGS | METH_KEYWORDS,
     "read(max_rows, end_offset, timeout_ms, headers=False, max_bytes=1 GiB) -> dict of Arrow buffers and\n"
     "status. Stops at max_rows, once the chunk's buffers (header entries included) hold max_bytes\n"
     "(at most 1 GiB; at least one record), at the first offset >= end_offset, at partition EOF at or\n"
     "past end_offset, at an error, or when timeout_ms have passed."},
    {"watermark_offsets", (PyCFunction)Reader_watermark_offsets, METH_VARARGS,
     "watermark_offsets(topic, partition, timeout_ms) -> (low, high) asked from the broker."},
    {"close", (PyCFunction)Reader_close, METH_NOARGS, "close(): destroy the consumer (no group leave or commit: reads only assign)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jetspark.datasources.kafka._kafka_arrow.Reader",
    .tp_doc = PyDoc_STR("Reader(conf: dict[str, str]): a librdkafka consumer filling Arrow buffers."),
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_methods = Reader_methods,
};

static PyObject *librdkafka_version(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    if (check_loaded())
        return NULL;
    return PyUnicode_FromString(rd_kafka_version_str());
}

/* load(path): dlopen() librdkafka at path (the copy confluent-kafka loaded: dlopen of a loaded
 * file returns the same handle) and resolve every function of _rdkafka_api.h. ImportError
 * naming the file and the missing symbol when that fails; a second load() must name the same
 * library. */
static PyObject *load(PyObject *Py_UNUSED(m), PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return NULL;
    dlerror();
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        PyErr_Format(PyExc_ImportError, "cannot load librdkafka from %s: %s", path, why ? why : "dlopen failed");
        return NULL;
    }
    if (rdk_handle) {
        dlclose(handle); /* drops the reference just taken; the library stays loaded */
        if (handle != rdk_handle) {
            PyErr_Format(PyExc_ImportError, "librdkafka is already loaded from %s, not %s", rdk_path, path);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    void *found[sizeof rdk_table / sizeof rdk_table[0]];
    for (size_t i = 0; i < sizeof rdk_table / sizeof rdk_table[0]; i++) {
        found[i] = dlsym(handle, rdk_table[i].name);
        if (!found[i]) {
            dlclose(handle);
            PyErr_Format(PyExc_ImportError, "librdkafka at %s lacks the function %s (too old a librdkafka?)",
                         path, rdk_table[i].name);
            return NULL;
        }
    }
    char *copy = strdup(path);
    if (!copy) {
        dlclose(handle);
        return PyErr_NoMemory();
    }
    for (size_t i = 0; i < sizeof rdk_table / sizeof rdk_table[0]; i++)
        *rdk_table[i].slot = found[i];
    rdk_path = copy;
    rdk_handle = handle;
    Py_RETURN_NONE;
}

static PyObject *loaded_path(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    if (!rdk_handle)
        Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(rdk_path);
}

static PyObject *librdkafka_version_int(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored)) {
    if (check_loaded())
        return NULL;
    return PyLong_FromLong(rd_kafka_version());
}

static PyMethodDef module_methods[] = {
    {"load", load, METH_VARARGS,
     "load(path): use the librdkafka shared library at path (the one confluent-kafka loaded)."},
    {"loaded_path", loaded_path, METH_NOARGS, "The path given to load(), or None before it."},
    {"librdkafka_version", librdkafka_version, METH_NOARGS, "The loaded librdkafka's version string."},
    {"librdkafka_version_int", librdkafka_version_int, METH_NOARGS,
     "The loaded librdkafka's version as an int (0xMMmmrrxx, as confluent_kafka.libversion()[1])."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kafka_arrow", "librdkafka → Arrow buffers without a Python object per record.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__kafka_arrow(void) {
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
