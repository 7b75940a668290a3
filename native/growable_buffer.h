/* A growable byte buffer for the native readers (datasources/kafka/_kafka_arrow.c,
 * jetspark/schemas/_avro_arrow.c): Arrow buffers are built by appending to these, then
 * handed to Python as bytes. A zeroed Buf is empty; capacity doubles from 4 KiB.
 * Include after <Python.h>. */
#ifndef JETSPARK_GROWABLE_BUFFER_H
#define JETSPARK_GROWABLE_BUFFER_H

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

/* Room for `extra` more bytes; -1 when out of memory or when the size would overflow (the
 * buffer is unchanged). */
static inline int buf_reserve(Buf *b, size_t extra) {
    if (extra > (size_t)PY_SSIZE_T_MAX - b->len)
        return -1;  /* no buffer this large can be handed to Python */
    size_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap = cap > (size_t)PY_SSIZE_T_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Append `n` bytes from `src`; -1 when out of memory. */
static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static inline void buf_free(Buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* The buffer's bytes as a new bytes object (NULL with an exception set on failure). */
static inline PyObject *buf_bytes(const Buf *b) {
    return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->len);
}

#endif
