/*
 * Avro binary → Arrow buffers, with no Python object per record.
 *
 * decode(program, starts, ends, data) runs a compiled schema (jetspark.schemas.avro_program)
 * over every payload: payload i is data[starts[i]:ends[i]] (int64 positions, so the payloads
 * of a Kafka column are read where they lie, behind their wire-format header). Each node of
 * the program that stores values fills Arrow-layout buffers: one validity byte per element
 * (packed by the caller), fixed-width values, int32 offsets and data bytes. A record that
 * does not decode — cut short, a varint too long, a union branch or enum index out of range,
 * a negative length — is rolled back in every node and stored as a null record; its error
 * code goes into the errors buffer. Bytes after a record's end are ignored, as Avro's own
 * readers (and Spark's from_avro) ignore them; each payload is decoded within its own bounds,
 * so nothing spills into the next record.
 *
 * The GIL is released while decoding. The Python side is jetspark.schemas.avro_program.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "growable_buffer.h"
#include "record_columns.h"

/* Node kinds: the program's words (keep in step with avro_program.py). */
enum {
    K_NULL = 0, K_BOOLEAN = 1, K_INT = 2, K_LONG = 3, K_FLOAT = 4, K_DOUBLE = 5, K_BYTES = 6,
    K_FIXED = 7, K_ENUM = 8, K_RECORD = 9, K_ARRAY = 10, K_MAP = 11, K_UNION = 12,
    K_DECIMAL_BYTES = 13, K_DECIMAL_FIXED = 14
};
/* What a number is stored as (promotions of Avro's schema resolution). */
enum { O_SAME = 0, O_INT64 = 1, O_FLOAT32 = 2, O_FLOAT64 = 3 };
/* Error codes per record (0: decoded). */
enum { E_OK = 0, E_SHORT = 1, E_VARINT = 2, E_BRANCH = 3, E_ENUM = 4, E_LENGTH = 5, E_MEMORY = 6,
       E_LIMIT = 7 };

#define MAX_FIXED (1 << 20)    /* a fixed's size is in (0, MAX_FIXED] (avro_types.MAX_FIXED_SIZE) */
#define SPARE_PER_BYTE 64      /* items that take no bytes (null, a record of nulls): per byte */

typedef struct Node {
    int kind, out, store, nchildren, arg;  /* arg: fixed size, enum symbols, union null branch */
    int64_t width;                         /* the fewest bytes an element takes on the wire */
    int64_t cost;                          /* column bytes an element adds (data bytes aside) */
    int64_t *room;                         /* column bytes the record may still add */
    struct Node **children;
    Columns col;                           /* data_len: bytes (var-width) or children (array, map) */
} Node;

static int read_long(Cursor *c, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    while (1) {
        if (c->p >= c->end)
            return E_SHORT;
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 63)
            return E_VARINT;
    }
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return E_OK;
}

static int element_size(const Node *n) {
    switch (n->kind) {
    case K_BOOLEAN: return 1;
    case K_INT: case K_ENUM: return n->out == O_INT64 ? 8 : n->out == O_FLOAT32 ? 4 : n->out == O_FLOAT64 ? 8 : 4;
    case K_LONG: return n->out == O_FLOAT32 ? 4 : 8;
    case K_FLOAT: return n->out == O_FLOAT64 ? 8 : 4;
    case K_DOUBLE: return 8;
    case K_FIXED: return n->arg;
    case K_DECIMAL_BYTES: case K_DECIMAL_FIXED: return 16;
    default: return 0;
    }
}

static int var_width(const Node *n) { return n->kind == K_BYTES; }
static int nested_offsets(const Node *n) { return n->kind == K_ARRAY || n->kind == K_MAP; }

/* One element: its validity byte; the caller has put the value. */
static int valid(Node *n, uint8_t v) {
    if ((*n->room -= n->cost) < 0)
        return E_LIMIT;
    if (buf_put(&n->col.validity, &v, 1))
        return E_MEMORY;
    n->col.count++;
    return E_OK;
}

static int append_null(Node *n);

static int close_offset(Node *n) {
    return buf_put(&n->col.offsets, &n->col.data_len, 4) ? E_MEMORY : E_OK;
}

/* A null element in n and, for a record or union, in every stored child. */
static int append_null(Node *n) {
    if (!n->store)
        return E_OK;
    int size = element_size(n);
    if (size) {
        if (buf_reserve(&n->col.values, size))
            return E_MEMORY;
        memset(n->col.values.p + n->col.values.len, 0, size);
        n->col.values.len += size;
    } else if (var_width(n) || nested_offsets(n)) {
        if (close_offset(n))
            return E_MEMORY;
    } else if (n->kind == K_RECORD || n->kind == K_UNION) {
        for (int i = 0; i < n->nchildren; i++) {
            Node *child = n->children[i];
            if (n->kind == K_UNION && i == n->arg)
                continue;  /* the null branch stores nothing */
            int e = append_null(child);
            if (e)
                return e;
        }
    }
    return valid(n, 0);
}

static int decode(Node *n, Cursor *c);

static int store_number(Node *n, double d, int64_t l, int is_float) {
    if (!n->store)
        return E_OK;
    int e = E_OK;
    int kind_out = n->out;
    if (n->kind == K_FLOAT && kind_out == O_SAME) {
        float f = (float)d;
        e = buf_put(&n->col.values, &f, 4) ? E_MEMORY : E_OK;
    } else if (n->kind == K_DOUBLE || kind_out == O_FLOAT64) {
        double v = is_float ? d : (double)l;
        e = buf_put(&n->col.values, &v, 8) ? E_MEMORY : E_OK;
    } else if (kind_out == O_FLOAT32) {
        float v = is_float ? (float)d : (float)l;
        e = buf_put(&n->col.values, &v, 4) ? E_MEMORY : E_OK;
    } else if (n->kind == K_LONG || kind_out == O_INT64) {
        e = buf_put(&n->col.values, &l, 8) ? E_MEMORY : E_OK;
    } else {
        int32_t v = (int32_t)l;
        e = buf_put(&n->col.values, &v, 4) ? E_MEMORY : E_OK;
    }
    return e ? e : valid(n, 1);
}

static int take(Cursor *c, size_t n, const uint8_t **out) {
    if ((size_t)(c->end - c->p) < n)
        return E_SHORT;
    *out = c->p;
    c->p += n;
    return E_OK;
}

/* Avro's bytes and string: a zig-zag long length, then that many bytes. */
static int take_prefixed(Cursor *c, const uint8_t **out, int64_t *len) {
    int e;
    if ((e = read_long(c, len)))
        return e;
    if (*len < 0)
        return E_LENGTH;
    return take(c, (size_t)*len, out);
}

/* Big-endian two's complement of 1..16 bytes, as Arrow's decimal128. A wider one whose value
 * needs more than 128 bits is stored as the widest 128-bit number of its sign, which no
 * precision holds: the Python side makes its record malformed (no truncated value). */
static int store_decimal(Node *n, const uint8_t *b, int64_t len) {
    if (!n->store)
        return E_OK;
    uint8_t out[16];
    uint8_t fill = (len > 0 && (b[0] & 0x80)) ? 0xff : 0x00;
    memset(out, fill, 16);
    int64_t k = len < 16 ? len : 16;
    for (int64_t i = 0; i < k; i++)
        out[i] = b[len - 1 - i];  /* little-endian */
    if (len > 16) {
        int wide = (out[15] & 0x80) != (fill & 0x80);
        for (int64_t i = 0; i < len - 16 && !wide; i++)
            wide = b[i] != fill;
        if (wide) {
            memset(out, fill ? 0x00 : 0xff, 16);
            out[15] = fill ? 0x80 : 0x7f;
        }
    }
    if (buf_put(&n->col.values, out, 16))
        return E_MEMORY;
    return valid(n, 1);
}

static int decode_items(Node *n, Cursor *c, int is_map) {
    int e;
    while (1) {
        int64_t count;
        if ((e = read_long(c, &count)))
            return e;
        if (count == 0)
            break;
        if (count < 0) {  /* a block with its byte size: skip the size */
            int64_t size;
            if ((e = read_long(c, &size)))
                return e;
            if (count == INT64_MIN)
                return E_LENGTH;
            count = -count;
        }
        /* more items than the bytes left hold: cut short for sure. Items that take no bytes
         * (null, a record of nulls) count against the record's spare items instead, so a
         * record is refused in time in proportion to its bytes. */
        int64_t width = n->children[0]->width + (is_map ? n->children[1]->width : 0);
        if (width ? count > (int64_t)(c->end - c->p) / width : count > c->spare)
            return E_LENGTH;
        if (!width)
            c->spare -= count;
        for (int64_t i = 0; i < count; i++) {
            if (is_map && (e = decode(n->children[0], c)))
                return e;
            if ((e = decode(n->children[is_map], c)))
                return e;
            if (n->col.data_len == INT32_MAX)
                return E_LENGTH;
            n->col.data_len++;
        }
    }
    if (!n->store)
        return E_OK;
    if ((e = close_offset(n)))
        return e;
    return valid(n, 1);
}

static int decode(Node *n, Cursor *c) {
    int e;
    int64_t l;
    const uint8_t *b;
    switch (n->kind) {
    case K_NULL:
        return n->store ? append_null(n) : E_OK;
    case K_BOOLEAN:
        if ((e = take(c, 1, &b)))
            return e;
        if (!n->store)
            return E_OK;
        {
            uint8_t v = *b ? 1 : 0;
            if (buf_put(&n->col.values, &v, 1))
                return E_MEMORY;
        }
        return valid(n, 1);
    case K_INT:
    case K_LONG:
        if ((e = read_long(c, &l)))
            return e;
        return store_number(n, 0, l, 0);
    case K_FLOAT: {
        float f;
        if ((e = take(c, 4, &b)))
            return e;
        memcpy(&f, b, 4);
        return store_number(n, f, 0, 1);
    }
    case K_DOUBLE: {
        double d;
        if ((e = take(c, 8, &b)))
            return e;
        memcpy(&d, b, 8);
        return store_number(n, d, 0, 1);
    }
    case K_BYTES:
        if ((e = take_prefixed(c, &b, &l)))
            return e;
        if (!n->store)
            return E_OK;
        if ((int64_t)n->col.data_len + l > INT32_MAX)
            return E_LENGTH;
        if ((*n->room -= l) < 0)
            return E_LIMIT;
        if (buf_put(&n->col.data, b, (size_t)l))
            return E_MEMORY;
        n->col.data_len += (int32_t)l;
        if ((e = close_offset(n)))
            return e;
        return valid(n, 1);
    case K_FIXED:
        if ((e = take(c, (size_t)n->arg, &b)))
            return e;
        if (!n->store)
            return E_OK;
        if (buf_put(&n->col.values, b, (size_t)n->arg))
            return E_MEMORY;
        return valid(n, 1);
    case K_DECIMAL_BYTES:
        if ((e = take_prefixed(c, &b, &l)))
            return e;
        return store_decimal(n, b, l);
    case K_DECIMAL_FIXED:
        if ((e = take(c, (size_t)n->arg, &b)))
            return e;
        return store_decimal(n, b, n->arg);
    case K_ENUM:
        if ((e = read_long(c, &l)))
            return e;
        if (l < 0 || l >= n->arg)
            return E_ENUM;
        return store_number(n, 0, l, 0);
    case K_RECORD:
        for (int i = 0; i < n->nchildren; i++)
            if ((e = decode(n->children[i], c)))
                return e;
        return n->store ? valid(n, 1) : E_OK;
    case K_ARRAY:
        return decode_items(n, c, 0);
    case K_MAP:
        return decode_items(n, c, 1);
    case K_UNION:
        if ((e = read_long(c, &l)))
            return e;
        if (l < 0 || l >= n->nchildren)
            return E_BRANCH;
        if (l == n->arg)  /* the null branch */
            return append_null(n);
        for (int i = 0; i < n->nchildren; i++) {
            if (i == n->arg)
                continue;
            if (i == l)
                e = decode(n->children[i], c);
            else
                e = append_null(n->children[i]);
            if (e)
                return e;
        }
        return n->store ? valid(n, 1) : E_OK;
    }
    return E_BRANCH;
}

/* ---- the program: int32 words in pre-order: kind, out, store, arg, nchildren, children… */

/* The fewest bytes an element of n takes on the wire (at most 2**40: no payload is that long). */
static int64_t min_width(const Node *n) {
    switch (n->kind) {
    case K_NULL: return 0;
    case K_FLOAT: return 4;
    case K_DOUBLE: return 8;
    case K_FIXED: case K_DECIMAL_FIXED: return n->arg;
    case K_RECORD: {
        int64_t sum = 0;
        for (int i = 0; i < n->nchildren; i++)
            sum += n->children[i]->width;
        return sum < ((int64_t)1 << 40) ? sum : ((int64_t)1 << 40);
    }
    default: return 1;  /* a number, length, count or branch index: one byte at least */
    }
}

static Node *build(const int32_t *w, Py_ssize_t nw, Py_ssize_t *at, Node ***all, int *nall, int64_t *room) {
    if (*at + 5 > nw)
        return NULL;
    Node *n = calloc(1, sizeof(Node));
    if (!n)
        return NULL;
    n->kind = w[*at];
    n->out = w[*at + 1];
    n->store = w[*at + 2];
    n->arg = w[*at + 3];
    n->nchildren = w[*at + 4];
    *at += 5;
    Node **grown = realloc(*all, sizeof(Node *) * (*nall + 1));
    if (!grown) {
        free(n);
        return NULL;
    }
    *all = grown;
    (*all)[(*nall)++] = n;
    n->room = room;
    if (n->kind < K_NULL || n->kind > K_DECIMAL_FIXED || n->nchildren < 0 || n->nchildren > 100000)
        return NULL;
    if ((n->kind == K_FIXED || n->kind == K_DECIMAL_FIXED) && (n->arg <= 0 || n->arg > MAX_FIXED))
        return NULL;
    if ((n->kind == K_ARRAY && n->nchildren != 1) || (n->kind == K_MAP && n->nchildren != 2))
        return NULL;
    if (n->nchildren) {
        n->children = calloc(n->nchildren, sizeof(Node *));
        if (!n->children)
            return NULL;
        for (int i = 0; i < n->nchildren; i++)
            if (!(n->children[i] = build(w, nw, at, all, nall, room)))
                return NULL;
    }
    n->width = min_width(n);
    n->cost = 1 + element_size(n) + ((var_width(n) || nested_offsets(n)) ? 4 : 0);
    if ((var_width(n) || nested_offsets(n)) && n->store) {
        int32_t zero = 0;
        if (buf_put(&n->col.offsets, &zero, 4))
            return NULL;
    }
    return n;
}

static void free_nodes(Node **all, int nall) {
    for (int i = 0; i < nall; i++) {
        free(all[i]->children);
        columns_free(&all[i]->col);
        free(all[i]);
    }
    free(all);
}

static int decode_root(void *root, Cursor *c) {
    Node *n = root;
    *n->room = RECORD_OUTPUT_LIMIT;
    c->spare = SPARE_PER_BYTE * (int64_t)(c->end - c->p) + SPARE_PER_BYTE;
    return decode(n, c);
}

static int null_root(void *root) {
    Node *n = root;
    *n->room = INT64_MAX;  /* a null row is the program's size, whatever the record held */
    return append_null(n);
}

static PyObject *py_decode(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer prog, starts, ends, data;
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &prog, &starts, &ends, &data))
        return NULL;
    PyObject *result = NULL;
    Node **all = NULL;
    int nall = 0;
    Columns **cols = NULL;
    Py_ssize_t at = 0;
    int64_t room = 0;
    Node *root = build((const int32_t *)prog.buf, prog.len / 4, &at, &all, &nall, &room);
    if (!root || at != prog.len / 4 || ends.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "malformed Avro decoding program");
        goto done;
    }
    cols = malloc(sizeof(Columns *) * (nall ? nall : 1));
    if (!cols) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < nall; i++)
        cols[i] = &all[i]->col;
    result = decode_to_python(root, cols, nall, &starts, &ends, &data, decode_root, null_root, E_LENGTH,
                              E_MEMORY);
done:
    if (all)
        free_nodes(all, nall);
    free(cols);
    PyBuffer_Release(&prog);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", py_decode, METH_VARARGS,
     "decode(program, starts, ends, data) -> ([(count, validity, values, offsets, data) per node], errors)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_avro_arrow", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__avro_arrow(void) { return PyModule_Create(&module); }
