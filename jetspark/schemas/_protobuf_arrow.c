/*
 * Protobuf binary → Arrow buffers, with no Python object per record.
 *
 * decode(program, starts, ends, data) runs a compiled message (jetspark.schemas.protobuf_program)
 * over every payload data[starts[i]:ends[i]]. A message node reads its fields in whatever
 * order they come: a repeated field's elements are stored as they come (packed or not); a
 * singular field is only remembered (the last occurrence wins, as in protobuf) and stored
 * after the message's end, so every column gets exactly one element per message. A field
 * the program does not know, or one whose wire type is not its type's, is skipped, as a
 * protobuf parser keeps it as an unknown field; so is a number a closed (proto2) enum does not
 * define (the field keeps what it had; a list leaves it out). A oneof member clears the others.
 * An absent singular field is null (as Spark's from_protobuf gives it; the Python side puts a
 * declared proto2 default in its place); a field without presence (proto3) whose value is its
 * default is null too, since on the wire it is the same as absent.
 *
 * A record that does not decode — cut short, a varint over 10 bytes, a wire type 6 or 7, an
 * unbalanced group, a length beyond its message — is rolled back in every node and stored as
 * a null record with its error code; so is one Spark's from_protobuf fails: a required field
 * missing (protobuf-java does not parse it), or an unknown field of one of the root message's
 * numbers (from_protobuf checks the root message's unknown fields, not the others').
 *
 * frames(starts, ends, data) reads the message indexes Confluent's wire format puts before a
 * Protobuf payload: per record a key naming the message (0: the file's first message) and
 * where the payload starts.
 *
 * The GIL is released while decoding. The Python side is jetspark.schemas.protobuf_program.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "growable_buffer.h"
#include "record_columns.h"

/* Node kinds: the program's words (keep in step with protobuf_program.py). */
enum {
    K_INT32 = 0, K_INT64 = 1, K_UINT32 = 2, K_UINT64 = 3, K_SINT32 = 4, K_SINT64 = 5, K_BOOL = 6,
    K_ENUM = 7, K_FIXED32 = 8, K_FIXED64 = 9, K_FLOAT = 10, K_DOUBLE = 11, K_BYTES = 12,
    K_MESSAGE = 13, K_TIMESTAMP = 14, K_LIST = 15
};
/* Flags (F_DEFAULT: absent is the default, not null); bits 8 and up: a oneof member's oneof,
 * plus one (0: none, or the oneof has no other member). */
enum { F_STORE = 1, F_IMPLICIT = 2, F_DEFAULT = 4, F_REQUIRED = 8 };
#define ONEOF(n) ((n)->flags >> 8)
/* Wire types. */
enum { W_VARINT = 0, W_I64 = 1, W_LEN = 2, W_SGROUP = 3, W_EGROUP = 4, W_I32 = 5 };
/* Error codes per record (0: decoded). */
enum { E_OK = 0, E_SHORT = 1, E_VARINT = 2, E_WIRE = 3, E_LENGTH = 4, E_MEMORY = 5, E_DEPTH = 6,
       E_UNKNOWN = 7, E_REQUIRED = 8, E_LIMIT = 9, E_TIME = 10 };

#define MAX_DEPTH 100
#define DIRECT_FIELDS 1024 /* field numbers below this are found by index, others by search */

typedef struct {
    int present;
    uint64_t bits;           /* a varint or fixed value */
    const uint8_t *p, *end;  /* a length-delimited value */
} Slot;

typedef struct Node {
    int kind, number, flags, nchildren;
    struct Node **children;
    Slot *slots;             /* messages: the last occurrence of each singular child */
    int16_t *direct;         /* messages: child index by field number (< DIRECT_FIELDS), -1 none */
    int32_t enum_default;    /* enums: the number of the enum's first value */
    int enum_count;          /* enums: how many numbers a closed enum defines (0: open) */
    int32_t *enum_numbers;   /* enums: those numbers, ascending */
    int64_t cost;            /* column bytes an element adds (data bytes aside) */
    int64_t *room;           /* column bytes the record may still add (RECORD_OUTPUT_LIMIT) */
    Columns col;             /* data_len: bytes (K_BYTES) or elements (K_LIST) so far */
} Node;

static int read_varint(Cursor *c, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (c->p >= c->end)
            return E_SHORT;
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return E_OK;
        }
    }
    return E_VARINT;
}

static int take(Cursor *c, size_t n, const uint8_t **out) {
    if ((size_t)(c->end - c->p) < n)
        return E_SHORT;
    *out = c->p;
    c->p += n;
    return E_OK;
}

static int take_len(Cursor *c, Cursor *inner) {
    uint64_t len;
    int e = read_varint(c, &len);
    if (e)
        return e;
    if (len > (uint64_t)(c->end - c->p))
        return E_LENGTH;
    inner->p = c->p;
    inner->end = c->p + len;
    c->p += len;
    return E_OK;
}

static int skip(Cursor *c, int wire, int number, int depth) {
    uint64_t v;
    const uint8_t *b;
    Cursor inner;
    switch (wire) {
    case W_VARINT: return read_varint(c, &v);
    case W_I64: return take(c, 8, &b);
    case W_I32: return take(c, 4, &b);
    case W_LEN: return take_len(c, &inner);
    case W_SGROUP:
        if (depth > MAX_DEPTH)
            return E_DEPTH;
        while (1) {
            uint64_t tag;
            int e = read_varint(c, &tag);
            if (e)
                return e;
            int w = (int)(tag & 7);
            if (w == W_EGROUP)
                return (int)(tag >> 3) == number ? E_OK : E_WIRE;
            if ((e = skip(c, w, (int)(tag >> 3), depth + 1)))
                return e;
        }
    default: return E_WIRE;
    }
}

static int wire_of(int kind) {
    switch (kind) {
    case K_FIXED64: case K_DOUBLE: return W_I64;
    case K_FIXED32: case K_FLOAT: return W_I32;
    case K_BYTES: case K_MESSAGE: case K_TIMESTAMP: return W_LEN;
    default: return W_VARINT;
    }
}

static int element_size(const Node *n) {
    switch (n->kind) {
    case K_BOOL: return 1;
    case K_INT32: case K_UINT32: case K_SINT32: case K_ENUM: case K_FIXED32: case K_FLOAT: return 4;
    case K_INT64: case K_UINT64: case K_SINT64: case K_FIXED64: case K_DOUBLE: case K_TIMESTAMP: return 8;
    default: return 0;
    }
}

static int valid(Node *n, uint8_t v) {
    if ((*n->room -= n->cost) < 0)
        return E_LIMIT;
    if (buf_put(&n->col.validity, &v, 1))
        return E_MEMORY;
    n->col.count++;
    return E_OK;
}

static int close_offset(Node *n) {
    return buf_put(&n->col.offsets, &n->col.data_len, 4) ? E_MEMORY : E_OK;
}

/* A null element in n and, for a message, in every stored child (a list: an empty one). */
static int append_null(Node *n) {
    if (!(n->flags & F_STORE))
        return E_OK;
    int size = element_size(n);
    if (size) {
        if (buf_reserve(&n->col.values, size))
            return E_MEMORY;
        memset(n->col.values.p + n->col.values.len, 0, size);
        n->col.values.len += size;
    } else if (n->kind == K_BYTES || n->kind == K_LIST) {
        if (close_offset(n))
            return E_MEMORY;
    } else if (n->kind == K_MESSAGE) {
        for (int i = 0; i < n->nchildren; i++) {
            int e = append_null(n->children[i]);
            if (e)
                return e;
        }
    }
    return valid(n, 0);
}

/* A fixed-width value of a scalar node from its raw bits (varint or fixed). */
static int store_scalar(Node *n, uint64_t bits) {
    if (!(n->flags & F_STORE))
        return E_OK;
    if ((n->flags & F_IMPLICIT) && bits == 0)
        return append_null(n);  /* proto3's default: not told apart from absent */
    int e;
    switch (n->kind) {
    case K_BOOL: {
        uint8_t v = bits != 0;
        e = buf_put(&n->col.values, &v, 1);
        break;
    }
    case K_SINT32: {
        int32_t v = (int32_t)((uint32_t)(bits >> 1) ^ -(uint32_t)(bits & 1));
        e = buf_put(&n->col.values, &v, 4);
        break;
    }
    case K_SINT64: {
        int64_t v = (int64_t)((bits >> 1) ^ -(bits & 1));
        e = buf_put(&n->col.values, &v, 8);
        break;
    }
    case K_INT32: case K_UINT32: case K_ENUM: case K_FIXED32: case K_FLOAT: {
        uint32_t v = (uint32_t)bits;
        e = buf_put(&n->col.values, &v, 4);
        break;
    }
    default:
        e = buf_put(&n->col.values, &bits, 8);
    }
    return e ? E_MEMORY : valid(n, 1);
}

static int store_bytes(Node *n, const uint8_t *b, size_t len) {
    if (!(n->flags & F_STORE))
        return E_OK;
    if ((n->flags & F_IMPLICIT) && len == 0)
        return append_null(n);
    if ((int64_t)n->col.data_len + (int64_t)len > INT32_MAX)
        return E_LENGTH;
    if ((*n->room -= (int64_t)len) < 0)
        return E_LIMIT;
    if (buf_put(&n->col.data, b, len))
        return E_MEMORY;
    n->col.data_len += (int32_t)len;
    return close_offset(n) ? E_MEMORY : valid(n, 1);
}

static int decode_message(Node *n, Cursor *c, int depth);

/* google.protobuf.Timestamp (or Duration): seconds (1) and nanos (2), stored as microseconds. */
static int decode_timestamp(Node *n, Cursor *c) {
    int64_t seconds = 0, nanos = 0;
    while (c->p < c->end) {
        uint64_t tag, v;
        int e = read_varint(c, &tag);
        if (e)
            return e;
        int number = (int)(tag >> 3), wire = (int)(tag & 7);
        if ((number == 1 || number == 2) && wire == W_VARINT) {
            if ((e = read_varint(c, &v)))
                return e;
            if (number == 1)
                seconds = (int64_t)v;
            else
                nanos = (int64_t)(int32_t)(uint32_t)v;
        } else if ((e = skip(c, wire, number, 0))) {
            return e;
        }
    }
    if (!(n->flags & F_STORE))
        return E_OK;
    int64_t micros;  /* past 64 bits: malformed, as Spark's from_protobuf fails (no wrapped value) */
    if (__builtin_mul_overflow(seconds, (int64_t)1000000, &micros) ||
        __builtin_add_overflow(micros, nanos / 1000, &micros))
        return E_TIME;
    return buf_put(&n->col.values, &micros, 8) ? E_MEMORY : valid(n, 1);
}

/* One value of element node n from the cursor, the wire type being n's. */
static int decode_value(Node *n, Cursor *c, int depth) {
    uint64_t bits;
    const uint8_t *b;
    Cursor inner;
    int e;
    switch (wire_of(n->kind)) {
    case W_VARINT:
        if ((e = read_varint(c, &bits)))
            return e;
        return store_scalar(n, bits);
    case W_I64:
        if ((e = take(c, 8, &b)))
            return e;
        memcpy(&bits, b, 8);
        return store_scalar(n, bits);
    case W_I32: {
        uint32_t v;
        if ((e = take(c, 4, &b)))
            return e;
        memcpy(&v, b, 4);
        return store_scalar(n, v);
    }
    default:
        if ((e = take_len(c, &inner)))
            return e;
        if (n->kind == K_BYTES)
            return store_bytes(n, inner.p, (size_t)(inner.end - inner.p));
        if (n->kind == K_TIMESTAMP)
            return decode_timestamp(n, &inner);
        return decode_message(n, &inner, depth + 1);
    }
}

static int find_child(const Node *n, int number) {
    if (number < DIRECT_FIELDS)
        return n->direct[number];
    for (int i = 0; i < n->nchildren; i++)
        if (n->children[i]->number == number)
            return i;
    return -1;
}

static int packable(int kind) { return wire_of(kind) != W_LEN; }

/* Whether an enum node takes the number: an open enum any, a closed one (proto2's) only those
 * it defines — protobuf keeps any other as an unknown field. */
static int enum_known(const Node *n, uint64_t bits) {
    if (n->kind != K_ENUM || !n->enum_count)
        return 1;
    int32_t v = (int32_t)(uint32_t)bits;
    int lo = 0, hi = n->enum_count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (n->enum_numbers[mid] == v)
            return 1;
        if (n->enum_numbers[mid] < v)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

/* One element of a repeated field from the cursor: stored (its list one longer) unless it is a
 * number its closed enum lacks, which protobuf keeps as an unknown field (in the root message
 * *unknown is set: from_protobuf fails the record). */
static int decode_element(Node *list, Node *item, Cursor *c, int depth, int *unknown) {
    int e;
    if (item->kind == K_ENUM && item->enum_count) {
        uint64_t bits;
        if ((e = read_varint(c, &bits)))
            return e;
        if (!enum_known(item, bits)) {
            if (depth == 0)
                *unknown = 1;
            return E_OK;
        }
        e = store_scalar(item, bits);
    } else {
        e = decode_value(item, c, depth);
    }
    if (e)
        return e;
    if (list->col.data_len == INT32_MAX)
        return E_LENGTH;
    list->col.data_len++;
    return E_OK;
}

static int decode_message(Node *n, Cursor *c, int depth) {
    int e, unknown = 0;  /* the root message keeps an unknown field of one of its numbers */
    if (depth > MAX_DEPTH)
        return E_DEPTH;
    for (int i = 0; i < n->nchildren; i++)
        n->slots[i].present = 0;
    while (c->p < c->end) {
        uint64_t tag;
        if ((e = read_varint(c, &tag)))
            return e;
        int number = (int)(tag >> 3), wire = (int)(tag & 7);
        if (number == 0 || tag >> 32)
            return E_WIRE;
        int i = find_child(n, number);
        Node *child = i < 0 ? NULL : n->children[i];
        if (child && child->kind == K_LIST) {
            Node *item = child->children[0];
            if (wire == W_LEN && packable(item->kind)) {
                Cursor run;
                if ((e = take_len(c, &run)))
                    return e;
                while (run.p < run.end)
                    if ((e = decode_element(child, item, &run, depth, &unknown)))
                        return e;
                continue;
            }
            if (wire == wire_of(item->kind)) {
                if ((e = decode_element(child, item, c, depth, &unknown)))
                    return e;
                continue;
            }
        } else if (child && wire == wire_of(child->kind)) {
            Slot value = {1, 0, NULL, NULL};
            const uint8_t *b;
            if (wire == W_VARINT) {
                e = read_varint(c, &value.bits);
            } else if (wire == W_I64) {
                if (!(e = take(c, 8, &b)))
                    memcpy(&value.bits, b, 8);
            } else if (wire == W_I32) {
                uint32_t v = 0;
                if (!(e = take(c, 4, &b)))
                    memcpy(&v, b, 4);
                value.bits = v;
            } else {
                Cursor inner;
                if (!(e = take_len(c, &inner))) {
                    value.p = inner.p;
                    value.end = inner.end;
                }
            }
            if (e)
                return e;
            if (!enum_known(child, value.bits)) {  /* an unknown field: the field keeps what it had */
                unknown |= depth == 0;
                continue;
            }
            n->slots[i] = value;
            if (ONEOF(child))  /* a oneof member set clears the others */
                for (int j = 0; j < n->nchildren; j++)
                    if (j != i && ONEOF(n->children[j]) == ONEOF(child))
                        n->slots[j].present = 0;
            continue;
        }
        if ((e = skip(c, wire, number, depth)))
            return e;
        /* a field of the message in another wire type: an unknown field, which from_protobuf
         * fails in the root message (and ignores in the others) */
        unknown |= child && depth == 0;
    }
    if ((*n->room -= n->nchildren) < 0)  /* a field visited counts as a byte, stored or not */
        return E_LIMIT;
    for (int i = 0; i < n->nchildren; i++)
        if ((n->children[i]->flags & F_REQUIRED) && !n->slots[i].present)
            return E_REQUIRED;
    for (int i = 0; i < n->nchildren; i++) {
        Node *child = n->children[i];
        Slot *s = &n->slots[i];
        if (child->kind == K_LIST) {
            if (child->flags & F_STORE) {
                if ((e = close_offset(child)) || (e = valid(child, 1)))
                    return e;
            }
        } else if (!s->present && !(child->flags & F_DEFAULT)) {
            if ((e = append_null(child)))
                return e;
        } else if (!s->present) {  /* a map entry's key or value: its default */
            Cursor empty = {c->end, c->end};
            if (wire_of(child->kind) != W_LEN)  /* an enum: its first value (proto2's may not be 0) */
                e = store_scalar(child, child->kind == K_ENUM ? (uint32_t)child->enum_default : 0);
            else if (child->kind == K_BYTES)
                e = store_bytes(child, c->end, 0);
            else if (child->kind == K_TIMESTAMP)
                e = decode_timestamp(child, &empty);
            else
                e = decode_message(child, &empty, depth + 1);
            if (e)
                return e;
        } else if (wire_of(child->kind) != W_LEN) {
            if ((e = store_scalar(child, s->bits)))
                return e;
        } else {
            Cursor inner = {s->p, s->end};
            if (child->kind == K_BYTES)
                e = store_bytes(child, inner.p, (size_t)(inner.end - inner.p));
            else if (child->kind == K_TIMESTAMP)
                e = decode_timestamp(child, &inner);
            else
                e = decode_message(child, &inner, depth + 1);
            if (e)
                return e;
        }
    }
    if (unknown)  /* after the record parsed and has its required fields, as protobuf-java checks */
        return E_UNKNOWN;
    return (n->flags & F_STORE) ? valid(n, 1) : E_OK;
}

/* ---- the program: int32 words in pre-order: kind, number, flags, nchildren, children… */

static Node *build(const int32_t *w, Py_ssize_t nw, Py_ssize_t *at, Node ***all, int *nall, int depth,
                   int64_t *room) {
    if (*at + 4 > nw || depth > MAX_DEPTH)
        return NULL;
    Node *n = calloc(1, sizeof(Node));
    if (!n)
        return NULL;
    Node **grown = realloc(*all, sizeof(Node *) * (*nall + 1));
    if (!grown) {
        free(n);
        return NULL;
    }
    *all = grown;
    (*all)[(*nall)++] = n;
    n->kind = w[*at];
    n->number = w[*at + 1];
    n->flags = w[*at + 2];
    n->nchildren = w[*at + 3];
    *at += 4;
    n->room = room;
    n->cost = 1 + element_size(n) + ((n->kind == K_BYTES || n->kind == K_LIST) ? 4 : 0);
    if (n->kind < K_INT32 || n->kind > K_LIST || n->nchildren < 0 || n->nchildren > 30000)
        return NULL;
    if (n->kind == K_ENUM) {  /* then: the first value's number, how many a closed enum defines, those */
        if (*at + 2 > nw)
            return NULL;
        n->enum_default = w[*at];
        n->enum_count = w[*at + 1];
        *at += 2;
        if (n->enum_count < 0 || n->enum_count > nw - *at)
            return NULL;
        if (n->enum_count) {
            n->enum_numbers = malloc(sizeof(int32_t) * n->enum_count);
            if (!n->enum_numbers)
                return NULL;
            memcpy(n->enum_numbers, w + *at, sizeof(int32_t) * n->enum_count);
            *at += n->enum_count;
            for (int i = 1; i < n->enum_count; i++)
                if (n->enum_numbers[i] <= n->enum_numbers[i - 1])
                    return NULL;
        }
    }
    if (n->kind == K_LIST && n->nchildren != 1)
        return NULL;
    if (n->kind != K_MESSAGE && n->kind != K_LIST && n->nchildren)
        return NULL;
    if (n->nchildren) {
        n->children = calloc(n->nchildren, sizeof(Node *));
        if (!n->children)
            return NULL;
        for (int i = 0; i < n->nchildren; i++)
            if (!(n->children[i] = build(w, nw, at, all, nall, depth + 1, room)))
                return NULL;
    }
    if (n->kind == K_MESSAGE) {
        n->slots = calloc(n->nchildren ? n->nchildren : 1, sizeof(Slot));
        n->direct = malloc(sizeof(int16_t) * DIRECT_FIELDS);
        if (!n->slots || !n->direct)
            return NULL;
        memset(n->direct, 0xff, sizeof(int16_t) * DIRECT_FIELDS);
        for (int i = 0; i < n->nchildren; i++) {
            int number = n->children[i]->number;
            if (number >= 1 && number < DIRECT_FIELDS)
                n->direct[number] = (int16_t)i;
        }
    }
    if ((n->kind == K_BYTES || n->kind == K_LIST) && (n->flags & F_STORE)) {
        int32_t zero = 0;
        if (buf_put(&n->col.offsets, &zero, 4))
            return NULL;
    }
    return n;
}

static void free_nodes(Node **all, int nall) {
    for (int i = 0; i < nall; i++) {
        free(all[i]->children);
        free(all[i]->slots);
        free(all[i]->direct);
        free(all[i]->enum_numbers);
        columns_free(&all[i]->col);
        free(all[i]);
    }
    free(all);
}

static int decode_root(void *root, Cursor *c) {
    Node *n = root;
    *n->room = RECORD_OUTPUT_LIMIT;
    return decode_message(n, c, 0);
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
    Node *root = build((const int32_t *)prog.buf, prog.len / 4, &at, &all, &nall, 0, &room);
    if (!root || root->kind != K_MESSAGE || at != prog.len / 4 || ends.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "malformed Protobuf decoding program");
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

/* Message indexes: a zig-zag count, then that many zig-zag indexes (a lone 0: [0]). The key
 * packs up to 4 indexes below 2**15 with the count: 0 is [0]; -1: more than that (the caller
 * reads those itself); -2: cut short. */
#define KEY_OTHER (-1)
#define KEY_BAD (-2)

static PyObject *py_frames(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer starts, ends, data;
    if (!PyArg_ParseTuple(args, "y*y*y*", &starts, &ends, &data))
        return NULL;
    Py_ssize_t nrec = starts.len / 8;
    PyObject *keys = PyBytes_FromStringAndSize(NULL, nrec * 8);
    PyObject *payload = PyBytes_FromStringAndSize(NULL, nrec * 8);
    if (!keys || !payload || ends.len != starts.len) {
        Py_XDECREF(keys);
        Py_XDECREF(payload);
        PyBuffer_Release(&starts);
        PyBuffer_Release(&ends);
        PyBuffer_Release(&data);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "starts and ends differ in length");
        return NULL;
    }
    int64_t *k = (int64_t *)PyBytes_AS_STRING(keys), *out = (int64_t *)PyBytes_AS_STRING(payload);
    const int64_t *s0 = (const int64_t *)starts.buf, *s1 = (const int64_t *)ends.buf;
    const uint8_t *d = (const uint8_t *)data.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < nrec; r++) {
        out[r] = s0[r];
        k[r] = KEY_BAD;
        if (s1[r] < s0[r] || s0[r] < 0 || s1[r] > data.len)
            continue;
        Cursor c = {d + s0[r], d + s1[r]};
        uint64_t raw;
        if (read_varint(&c, &raw))
            continue;
        int64_t count = (int64_t)((raw >> 1) ^ -(raw & 1));
        if (count == 0) {
            k[r] = 0;
            out[r] = c.p - d;
            continue;
        }
        int64_t key = count <= 4 && count > 0 ? count : KEY_OTHER;
        int ok = count > 0;
        for (int64_t i = 0; ok && i < count; i++) {
            if (read_varint(&c, &raw)) {
                ok = 0;
                break;
            }
            int64_t index = (int64_t)((raw >> 1) ^ -(raw & 1));
            if (index < 0)
                ok = 0;
            else if (key != KEY_OTHER && index < 32768)
                key |= index << (3 + 15 * i);
            else
                key = KEY_OTHER;
        }
        if (!ok)
            continue;
        k[r] = key == 1 ? 0 : key;  /* [0] written in full is the file's first message too */
        out[r] = c.p - d;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&data);
    return Py_BuildValue("(NN)", keys, payload);
}

static PyMethodDef methods[] = {
    {"decode", py_decode, METH_VARARGS,
     "decode(program, starts, ends, data) -> ([(count, validity, values, offsets, data) per node], errors)"},
    {"frames", py_frames, METH_VARARGS,
     "frames(starts, ends, data) -> (message keys int64, payload starts int64)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_protobuf_arrow", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__protobuf_arrow(void) { return PyModule_Create(&module); }
