/* Arrow-layout columns that a native record decoder fills, one per node of its program, and
 * the loop that decodes every record into them: a record that does not decode is rolled back
 * in every column and stored as a null row, its error code kept. Shared by the schema
 * decoders (jetspark/schemas/_avro_arrow.c, _protobuf_arrow.c). Include after <Python.h> and
 * growable_buffer.h. */
#ifndef JETSPARK_RECORD_COLUMNS_H
#define JETSPARK_RECORD_COLUMNS_H

#include <stdint.h>

/* One node's buffers: one validity byte per element (packed by the caller), fixed-width
 * values, int32 offsets and data bytes; data_len counts bytes (var-width) or children (lists). */
typedef struct {
    Buf validity, values, offsets, data;
    int64_t count;
    int32_t data_len;
} Columns;

/* spare: how many more items that take no bytes (Avro's array<null>) the record may hold. */
typedef struct {
    const uint8_t *p, *end;
    int64_t spare;
} Cursor;

/* A record whose columns would grow by more than this many bytes (the decoders count each
 * element's validity, value, offset and data bytes) is refused: a few bytes of repeated empty
 * elements can otherwise stand for hundreds of times their size in columns. */
#define RECORD_OUTPUT_LIMIT ((int64_t)64 << 20)

typedef struct {
    size_t validity, values, offsets, data;
    int64_t count;
    int32_t data_len;
} Mark;

static void columns_free(Columns *c) {
    buf_free(&c->validity);
    buf_free(&c->values);
    buf_free(&c->offsets);
    buf_free(&c->data);
}

/* Payload r is data[starts[r]:ends[r]]: decode(root, its cursor) for every r. A record that
 * fails (a nonzero code; an out-of-range position gives e_length) is rolled back in every
 * column, its code goes into errors[r] and append_null(root) stores a null row. 0, or -1 when
 * out of memory (e_memory, or no memory for the null row). Call without the GIL. */
static int decode_records(void *root, Columns **cols, int ncols, Mark *marks, const int64_t *starts,
                          const int64_t *ends, Py_ssize_t nrec, const uint8_t *data, Py_ssize_t len,
                          char *errors, int (*decode)(void *, Cursor *), int (*append_null)(void *),
                          int e_length, int e_memory) {
    for (Py_ssize_t r = 0; r < nrec; r++) {
        for (int i = 0; i < ncols; i++) {
            Columns *c = cols[i];
            marks[i] = (Mark){c->validity.len, c->values.len, c->offsets.len, c->data.len, c->count, c->data_len};
        }
        int e;
        if (ends[r] < starts[r] || starts[r] < 0 || ends[r] > len) {
            e = e_length;
        } else {
            Cursor cursor = {data + starts[r], data + ends[r]};
            e = decode(root, &cursor);
        }
        if (!e)
            continue;
        for (int i = 0; i < ncols; i++) {
            Columns *c = cols[i];
            c->validity.len = marks[i].validity;
            c->values.len = marks[i].values;
            c->offsets.len = marks[i].offsets;
            c->data.len = marks[i].data;
            c->count = marks[i].count;
            c->data_len = marks[i].data_len;
        }
        errors[r] = (char)e;
        if (e == e_memory || append_null(root))
            return -1;
    }
    return 0;
}

/* ([(count, validity, values, offsets, data) per column], errors as bytes), or NULL with an
 * exception set. */
static PyObject *columns_result(Columns **cols, int ncols, const char *errors, Py_ssize_t nrec) {
    PyObject *nodes = PyList_New(ncols);
    if (!nodes)
        return NULL;
    for (int i = 0; i < ncols; i++) {
        Columns *c = cols[i];
        PyObject *t = Py_BuildValue("(LNNNN)", (long long)c->count, buf_bytes(&c->validity),
                                    buf_bytes(&c->values), buf_bytes(&c->offsets), buf_bytes(&c->data));
        if (!t) {
            Py_DECREF(nodes);
            return NULL;
        }
        PyList_SET_ITEM(nodes, i, t);
    }
    return Py_BuildValue("(NN)", nodes, PyBytes_FromStringAndSize(errors, nrec));
}

/* decode_records over Python buffers of int64 starts and ends and the data, the GIL released:
 * what columns_result gives, or NULL with an exception set. */
static PyObject *decode_to_python(void *root, Columns **cols, int ncols, const Py_buffer *starts,
                                  const Py_buffer *ends, const Py_buffer *data,
                                  int (*decode)(void *, Cursor *), int (*append_null)(void *),
                                  int e_length, int e_memory) {
    Py_ssize_t nrec = starts->len / 8;
    Mark *marks = malloc(sizeof(Mark) * (ncols ? ncols : 1));
    char *errors = calloc(nrec ? nrec : 1, 1);
    PyObject *result = NULL;
    if (!marks || !errors) {
        PyErr_NoMemory();
    } else {
        int failed;
        Py_BEGIN_ALLOW_THREADS
        failed = decode_records(root, cols, ncols, marks, (const int64_t *)starts->buf,
                                (const int64_t *)ends->buf, nrec, (const uint8_t *)data->buf, data->len,
                                errors, decode, append_null, e_length, e_memory);
        Py_END_ALLOW_THREADS
        if (failed)
            PyErr_NoMemory();
        else
            result = columns_result(cols, ncols, errors, nrec);
    }
    free(marks);
    free(errors);
    return result;
}

#endif
