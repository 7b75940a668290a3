/*
 * The part of librdkafka's public C API that _kafka_arrow.c uses, declared here instead of
 * including <librdkafka/rdkafka.h>: the extension builds with a C compiler and Python's
 * headers only, and calls the librdkafka that confluent-kafka loaded (one copy per process),
 * through function pointers resolved with dlsym() at import (see docs/design.md, "Native
 * Kafka reader: one librdkafka").
 *
 * Only ABI-stable parts of rdkafka.h are copied: opaque handle types, the public structs
 * rd_kafka_message_t and rd_kafka_topic_partition_t / _list_t (unchanged since librdkafka
 * 1.0; new fields would break every program built against an older header, which librdkafka
 * promises not to do), the enum values the reader uses, and the functions' signatures.
 */
#ifndef JETSPARK_RDKAFKA_API_H
#define JETSPARK_RDKAFKA_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* opaque handles */
typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_headers_s rd_kafka_headers_t;

/* enums: only the values the reader uses (an enum is an int in librdkafka's ABI) */
typedef int rd_kafka_resp_err_t;
#define RD_KAFKA_RESP_ERR_NO_ERROR 0
#define RD_KAFKA_RESP_ERR__PARTITION_EOF (-191)
#define RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE 10

typedef int rd_kafka_conf_res_t;
#define RD_KAFKA_CONF_OK 0

typedef int rd_kafka_type_t;
#define RD_KAFKA_CONSUMER 1

typedef int rd_kafka_timestamp_type_t; /* 0 not available, 1 create time, 2 log-append time */

/* rd_kafka_destroy_flags(): leave the consumer group state alone (no commit, no unassign) */
#define RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE 0x8

typedef struct rd_kafka_message_s {
    rd_kafka_resp_err_t err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

typedef struct rd_kafka_topic_partition_s {
    char *topic;
    int32_t partition;
    int64_t offset;
    void *metadata;
    size_t metadata_size;
    void *opaque;
    rd_kafka_resp_err_t err;
    void *_private;
} rd_kafka_topic_partition_t;

typedef struct rd_kafka_topic_partition_list_s {
    int cnt;
    int size;
    rd_kafka_topic_partition_t *elems;
} rd_kafka_topic_partition_list_t;

/*
 * X(return type, name, parameter list): every function the reader calls. _kafka_arrow.c
 * turns the list into one function pointer per name (same name as in rdkafka.h, so the code
 * reads as ordinary librdkafka code) and into the table of names that load() resolves.
 */
#define RDKAFKA_FUNCTIONS(X)                                                                                 \
    X(int, rd_kafka_version, (void))                                                                         \
    X(const char *, rd_kafka_version_str, (void))                                                            \
    X(const char *, rd_kafka_err2str, (rd_kafka_resp_err_t err))                                             \
    X(rd_kafka_resp_err_t, rd_kafka_last_error, (void))                                                      \
    X(rd_kafka_conf_t *, rd_kafka_conf_new, (void))                                                          \
    X(rd_kafka_conf_res_t, rd_kafka_conf_set,                                                                \
      (rd_kafka_conf_t * conf, const char *name, const char *value, char *errstr, size_t errstr_size))       \
    X(void, rd_kafka_conf_destroy, (rd_kafka_conf_t * conf))                                                 \
    X(rd_kafka_t *, rd_kafka_new,                                                                            \
      (rd_kafka_type_t type, rd_kafka_conf_t * conf, char *errstr, size_t errstr_size))                      \
    X(void, rd_kafka_destroy_flags, (rd_kafka_t * rk, int flags))                                            \
    X(rd_kafka_resp_err_t, rd_kafka_poll_set_consumer, (rd_kafka_t * rk))                                    \
    X(rd_kafka_queue_t *, rd_kafka_queue_get_consumer, (rd_kafka_t * rk))                                    \
    X(void, rd_kafka_queue_destroy, (rd_kafka_queue_t * rkqu))                                               \
    X(rd_kafka_resp_err_t, rd_kafka_assign, (rd_kafka_t * rk, const rd_kafka_topic_partition_list_t *parts)) \
    X(rd_kafka_topic_partition_list_t *, rd_kafka_topic_partition_list_new, (int size))                      \
    X(rd_kafka_topic_partition_t *, rd_kafka_topic_partition_list_add,                                       \
      (rd_kafka_topic_partition_list_t * rktparlist, const char *topic, int32_t partition))                  \
    X(void, rd_kafka_topic_partition_list_destroy, (rd_kafka_topic_partition_list_t * rktparlist))           \
    X(rd_kafka_resp_err_t, rd_kafka_query_watermark_offsets,                                                 \
      (rd_kafka_t * rk, const char *topic, int32_t partition, int64_t *low, int64_t *high, int timeout_ms))  \
    X(ssize_t, rd_kafka_consume_batch_queue,                                                                 \
      (rd_kafka_queue_t * rkqu, int timeout_ms, rd_kafka_message_t **rkmessages, size_t rkmessages_size))   \
    X(rd_kafka_message_t *, rd_kafka_consumer_poll, (rd_kafka_t * rk, int timeout_ms))                       \
    X(void, rd_kafka_message_destroy, (rd_kafka_message_t * rkmessage))                                      \
    X(const char *, rd_kafka_message_errstr, (const rd_kafka_message_t *rkmessage))                          \
    X(int64_t, rd_kafka_message_timestamp, (const rd_kafka_message_t *rkmessage,                             \
                                            rd_kafka_timestamp_type_t *tstype))                              \
    X(rd_kafka_resp_err_t, rd_kafka_message_headers,                                                         \
      (const rd_kafka_message_t *rkmessage, rd_kafka_headers_t **hdrsp))                                     \
    X(rd_kafka_resp_err_t, rd_kafka_header_get_all,                                                          \
      (const rd_kafka_headers_t *hdrs, size_t idx, const char **namep, const void **valuep, size_t *sizep))

#endif
