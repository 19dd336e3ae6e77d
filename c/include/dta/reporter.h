/*
 * dta/reporter.h -- header-only DTA (Direct Telemetry Access) reporter.
 * (One header by design: a switch agent or test harness includes it with no library to link.)
 *
 * Encoders for every header of both DTA wire protocols (docs/protocol.md):
 *   - the original prototype (short/long base header, Key-Write with 1/3/7
 *     data words, Key-Increment, Append, Postcarding) and its 2-byte NACK;
 *   - the native protocol v1 (12-byte datagram header, a builder that packs
 *     reports of every opcode into a caller buffer), its NACK and congestion notice;
 *   - loss and congestion: a retransmission ring over caller memory with selective
 *     resend on NACKs, congestion notices obeyed by token buckets, the tail probe;
 * plus a tiny UDP sender (dta_reporter_open / dta_send / dta_reporter_close) and the NACK
 * socket (dta_nack_open / dta_poll_control / dta_reporter_tail_probe).
 *
 * C99, no allocation, no dependency beyond libc and BSD sockets. Every
 * function is `static inline`. All multi-byte integers on the wire are
 * big-endian. Every encoder checks its buffer and its fields first and
 * writes nothing on failure; it returns the number of bytes written (>= 0)
 * or a negative `enum dta_status` code (see dta_strerror()).
 *
 * Define DTA_NO_SOCKETS before including to get only the encoders (no
 * <sys/socket.h>, no <netdb.h>). The sender uses getaddrinfo(), which
 * needs POSIX.1-2001: this header defines _POSIX_C_SOURCE 200112L when
 * nothing did, so include it first (or define _POSIX_C_SOURCE yourself)
 * when compiling with -std=c99.
 */
#ifndef DTA_REPORTER_H
#define DTA_REPORTER_H

#if !defined(DTA_NO_SOCKETS) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && \
    !defined(_DEFAULT_SOURCE) && !defined(_BSD_SOURCE) && !defined(__APPLE__)
#define _POSIX_C_SOURCE 200112L
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef DTA_NO_SOCKETS
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Constants                                                                 */
/* ------------------------------------------------------------------------ */

/** UDP destination port of DTA reports (docs/protocol.md). */
#define DTA_PORT 40040
/** UDP port NACKs are sent back to, at the reporter. */
#define DTA_NACK_PORT 40044

/** Opcodes, shared by both protocols (native adds Sketch-Merge). */
enum dta_opcode {
    DTA_OP_KEY_WRITE = 0x01,
    DTA_OP_APPEND = 0x02,
    DTA_OP_KEY_INCREMENT = 0x03,
    DTA_OP_POSTCARDING = 0x04,
    DTA_OP_SKETCH_MERGE = 0x05 /* native protocol only */
};

/** Status codes: 0 is success, every error is negative. */
enum dta_status {
    DTA_OK = 0,
    DTA_ERR_NO_SPACE = -1,     /* the caller buffer is too small */
    DTA_ERR_RANGE = -2,        /* a field is out of its range (see each function) */
    DTA_ERR_NULL = -3,         /* a required pointer is NULL */
    DTA_ERR_TRUNCATED = -4,    /* parse: fewer bytes than the message needs */
    DTA_ERR_TRAILING = -5,     /* parse: bytes after the end of the message */
    DTA_ERR_VERSION = -6,      /* parse: not native protocol version 1 */
    DTA_ERR_KIND = -7,         /* parse: not a NACK */
    DTA_ERR_COUNT = -8,        /* parse: NACK count not 0 or 1; build: 255 reports already */
    DTA_ERR_PRIORITY = -9,     /* parse: priority 3 */
    DTA_ERR_RESOLVE = -10,     /* sender: host/port did not resolve */
    DTA_ERR_SOCKET = -11       /* sender: socket()/sendto() failed (see errno) */
};

/** A short human-readable name for a status code. */
static inline const char *dta_strerror(int status)
{
    switch (status) {
    case DTA_OK: return "ok";
    case DTA_ERR_NO_SPACE: return "no_space";
    case DTA_ERR_RANGE: return "out_of_range";
    case DTA_ERR_NULL: return "null_pointer";
    case DTA_ERR_TRUNCATED: return "truncated";
    case DTA_ERR_TRAILING: return "trailing_bytes";
    case DTA_ERR_VERSION: return "unknown_version";
    case DTA_ERR_KIND: return "unknown_kind";
    case DTA_ERR_COUNT: return "bad_count";
    case DTA_ERR_PRIORITY: return "bad_priority";
    case DTA_ERR_RESOLVE: return "resolve_failed";
    case DTA_ERR_SOCKET: return "socket_error";
    default: return "unknown_error";
    }
}

/* ------------------------------------------------------------------------ */
/* Big-endian helpers                                                        */
/* ------------------------------------------------------------------------ */

static inline void dta_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void dta_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void dta_put_u64(uint8_t *p, uint64_t v)
{
    dta_put_u32(p, (uint32_t)(v >> 32));
    dta_put_u32(p + 4, (uint32_t)v);
}

static inline uint16_t dta_get_u16(const uint8_t *p)
{
    return (uint16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static inline uint32_t dta_get_u32(const uint8_t *p);
static inline uint64_t dta_get_u64(const uint8_t *p)
{
    return ((uint64_t)dta_get_u32(p) << 32) | dta_get_u32(p + 4);
}

static inline uint32_t dta_get_u32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* ------------------------------------------------------------------------ */
/* Prototype protocol (byte-exact with the Tofino prototype)                 */
/* ------------------------------------------------------------------------ */

/** Base-header format, chosen by configuration. */
enum dta_proto_format {
    DTA_PROTO_SHORT = 0, /* opcode, flags            (2 bytes) */
    DTA_PROTO_LONG = 1   /* opcode, seqnum, flags    (3 bytes) */
};

#define DTA_PROTO_SHORT_LEN 2
#define DTA_PROTO_LONG_LEN 3
#define DTA_PROTO_FLAG_IMMEDIATE 0x80u /* bit 7 of the flags byte */
#define DTA_PROTO_FLAG_RETRANSMIT 0x40u /* bit 6 of the flags byte (long only) */
#define DTA_PROTO_NACK_LEN 2
/** Largest prototype datagram: long header + Key-Write with 7 data words. */
#define DTA_PROTO_MAX_LEN (DTA_PROTO_LONG_LEN + 5 + 28)
/** Redundancy accepted by the encoders ([DTA §4.1]: "a maximum (e.g., 4)"). */
#define DTA_MAX_REDUNDANCY 4
/**
 * Redundancy N stores are created with and reporters use when nothing else is
 * said (dta_wire::DEFAULT_REDUNDANCY; c/tests checks both agree).
 */
#define DTA_DEFAULT_REDUNDANCY 2
/**
 * Size of a Postcarding store's value set when nothing else is said: values
 * sent must be below it (dta_wire::DEFAULT_POSTCARD_VALUES).
 */
#define DTA_DEFAULT_POSTCARD_VALUES 262144u

/**
 * Base-header fields. `seqnum` and `retransmittable` exist only in the long
 * format; the short format has neither, so encoding a short header with
 * `seqnum != 0` or `retransmittable != 0` is DTA_ERR_RANGE (the caller asked
 * for something the format cannot carry).
 */
struct dta_proto_header {
    enum dta_proto_format format;
    int immediate;       /* I bit */
    uint8_t seqnum;      /* long only */
    int retransmittable; /* R bit, long only */
};

static inline int dta_proto_header_len(enum dta_proto_format format)
{
    return format == DTA_PROTO_LONG ? DTA_PROTO_LONG_LEN : DTA_PROTO_SHORT_LEN;
}

static inline int dta__proto_check_header(const struct dta_proto_header *h)
{
    if (h == NULL) return DTA_ERR_NULL;
    if (h->format != DTA_PROTO_SHORT && h->format != DTA_PROTO_LONG) return DTA_ERR_RANGE;
    if (h->format == DTA_PROTO_SHORT && (h->seqnum != 0 || h->retransmittable)) return DTA_ERR_RANGE;
    return DTA_OK;
}

/* Writes the base header; the caller has checked header and capacity. */
static inline int dta__proto_put_header(uint8_t *buf, uint8_t opcode, const struct dta_proto_header *h)
{
    uint8_t flags = (uint8_t)(h->immediate ? DTA_PROTO_FLAG_IMMEDIATE : 0);
    buf[0] = opcode;
    if (h->format == DTA_PROTO_LONG) {
        if (h->retransmittable) flags = (uint8_t)(flags | DTA_PROTO_FLAG_RETRANSMIT);
        buf[1] = h->seqnum;
        buf[2] = flags;
        return DTA_PROTO_LONG_LEN;
    }
    buf[1] = flags;
    return DTA_PROTO_SHORT_LEN;
}

/** Encodes only a base header (2 or 3 bytes). opcode must be 0x01..0x04. */
static inline int dta_proto_encode_header(uint8_t *buf, size_t cap, uint8_t opcode,
                                          const struct dta_proto_header *h)
{
    int rc = dta__proto_check_header(h);
    if (rc != DTA_OK) return rc;
    if (buf == NULL) return DTA_ERR_NULL;
    if (opcode < DTA_OP_KEY_WRITE || opcode > DTA_OP_POSTCARDING) return DTA_ERR_RANGE;
    if (cap < (size_t)dta_proto_header_len(h->format)) return DTA_ERR_NO_SPACE;
    return dta__proto_put_header(buf, opcode, h);
}

/**
 * Key-Write: `redundancy u8, key u32, data` ([DTA §4.1]). data_len must be 4,
 * 12 or 28 (1, 3 or 7 words); redundancy 1..=DTA_MAX_REDUNDANCY.
 * Returns the datagram length.
 */
static inline int dta_proto_key_write(uint8_t *buf, size_t cap, const struct dta_proto_header *h,
                                      uint8_t redundancy, uint32_t key, const uint8_t *data,
                                      size_t data_len)
{
    int rc = dta__proto_check_header(h);
    size_t total;
    int off;
    if (rc != DTA_OK) return rc;
    if (buf == NULL || data == NULL) return DTA_ERR_NULL;
    if (data_len != 4 && data_len != 12 && data_len != 28) return DTA_ERR_RANGE;
    if (redundancy < 1 || redundancy > DTA_MAX_REDUNDANCY) return DTA_ERR_RANGE;
    total = (size_t)dta_proto_header_len(h->format) + 5 + data_len;
    if (cap < total) return DTA_ERR_NO_SPACE;
    off = dta__proto_put_header(buf, DTA_OP_KEY_WRITE, h);
    buf[off] = redundancy;
    dta_put_u32(buf + off + 1, key);
    memcpy(buf + off + 5, data, data_len);
    return (int)total;
}

/** Key-Increment: `redundancy u8, key u32, counter u64` ([DTA §4.3]). */
static inline int dta_proto_key_increment(uint8_t *buf, size_t cap, const struct dta_proto_header *h,
                                          uint8_t redundancy, uint32_t key, uint64_t counter)
{
    int rc = dta__proto_check_header(h);
    size_t total;
    int off;
    if (rc != DTA_OK) return rc;
    if (buf == NULL) return DTA_ERR_NULL;
    if (redundancy < 1 || redundancy > DTA_MAX_REDUNDANCY) return DTA_ERR_RANGE;
    total = (size_t)dta_proto_header_len(h->format) + 13;
    if (cap < total) return DTA_ERR_NO_SPACE;
    off = dta__proto_put_header(buf, DTA_OP_KEY_INCREMENT, h);
    buf[off] = redundancy;
    dta_put_u32(buf + off + 1, key);
    dta_put_u64(buf + off + 5, counter);
    return (int)total;
}

/** Append: `list_id u32, data u32` ([DTA §4.4]). */
static inline int dta_proto_append(uint8_t *buf, size_t cap, const struct dta_proto_header *h,
                                   uint32_t list_id, uint32_t data)
{
    int rc = dta__proto_check_header(h);
    size_t total;
    int off;
    if (rc != DTA_OK) return rc;
    if (buf == NULL) return DTA_ERR_NULL;
    total = (size_t)dta_proto_header_len(h->format) + 8;
    if (cap < total) return DTA_ERR_NO_SPACE;
    off = dta__proto_put_header(buf, DTA_OP_APPEND, h);
    dta_put_u32(buf + off, list_id);
    dta_put_u32(buf + off + 4, data);
    return (int)total;
}

/** Postcarding: `key u32, hop u8, data u32` ([DTA §4.2]). */
static inline int dta_proto_postcard(uint8_t *buf, size_t cap, const struct dta_proto_header *h,
                                     uint32_t key, uint8_t hop, uint32_t data)
{
    int rc = dta__proto_check_header(h);
    size_t total;
    int off;
    if (rc != DTA_OK) return rc;
    if (buf == NULL) return DTA_ERR_NULL;
    total = (size_t)dta_proto_header_len(h->format) + 9;
    if (cap < total) return DTA_ERR_NO_SPACE;
    off = dta__proto_put_header(buf, DTA_OP_POSTCARDING, h);
    dta_put_u32(buf + off, key);
    buf[off + 4] = hop;
    dta_put_u32(buf + off + 5, data);
    return (int)total;
}

/** Prototype NACK (translator -> reporter): `seqnum u8 | N:1 | reserved:7`. */
struct dta_proto_nack {
    uint8_t seqnum;
    int nack; /* N bit (bit 7 of byte 1) */
};

/** Parses a prototype NACK; exactly 2 bytes. Reserved bits are ignored. */
static inline int dta_proto_nack_parse(const uint8_t *buf, size_t len, struct dta_proto_nack *out)
{
    if (buf == NULL || out == NULL) return DTA_ERR_NULL;
    if (len < DTA_PROTO_NACK_LEN) return DTA_ERR_TRUNCATED;
    if (len > DTA_PROTO_NACK_LEN) return DTA_ERR_TRAILING;
    out->seqnum = buf[0];
    out->nack = (buf[1] & 0x80u) != 0;
    return DTA_OK;
}

/* ------------------------------------------------------------------------ */
/* Native protocol, version 1                                                */
/* ------------------------------------------------------------------------ */

#define DTA_NATIVE_VERSION 1
#define DTA_NATIVE_KIND_REPORTS 0
#define DTA_NATIVE_KIND_NACK 1
#define DTA_NATIVE_KIND_NOTICE 2
#define DTA_NATIVE_KIND_HELLO 3
#define DTA_NATIVE_HEADER_LEN 12
#define DTA_NATIVE_REPORT_HEADER_LEN 4
#define DTA_NATIVE_MAX_REPORTS 255
#define DTA_NATIVE_MIN_KEY 1
#define DTA_NATIVE_MAX_KEY 16
#define DTA_NATIVE_MIN_DATA 4
#define DTA_NATIVE_MAX_DATA 64
#define DTA_NATIVE_NACK_LEN 12
#define DTA_NATIVE_NACK_SKETCH_LEN 20
#define DTA_NATIVE_NACK_MISSING_LEN 20
#define DTA_NATIVE_NOTICE_LEN 24
#define DTA_NATIVE_HELLO_LEN 20
/** A congestion notice's rate meaning "no limit". */
#define DTA_RATE_UNLIMITED 0xFFFFFFFFu

/* Also defined by dta/dta.h (the C ABI); whichever is included first defines it. */
#ifndef DTA_PRIORITY_DEFINED
#define DTA_PRIORITY_DEFINED
enum dta_priority { DTA_PRIORITY_LOW = 0, DTA_PRIORITY_MEDIUM = 1, DTA_PRIORITY_HIGH = 2 };
#endif

/**
 * Builds one native datagram in a caller buffer. Start with
 * dta_native_begin(), add reports with dta_native_*(), then send
 * `b.buf[0 .. b.len)` (dta_native_len()). The header's count is kept up to
 * date after every report, so the buffer is a valid datagram whenever
 * count >= 1. A failed add leaves the builder unchanged.
 */
struct dta_native_builder {
    uint8_t *buf;
    size_t cap;
    size_t len;
    unsigned count;
};

/**
 * Writes the 12-byte datagram header (kind 0). priority 0..2.
 * Returns DTA_OK or an error.
 */
static inline int dta_native_begin(struct dta_native_builder *b, uint8_t *buf, size_t cap,
                                   enum dta_priority priority, int retransmittable,
                                   uint32_t reporter_id, uint32_t seq)
{
    if (b == NULL || buf == NULL) return DTA_ERR_NULL;
    if ((unsigned)priority > DTA_PRIORITY_HIGH) return DTA_ERR_RANGE;
    if (cap < DTA_NATIVE_HEADER_LEN) return DTA_ERR_NO_SPACE;
    buf[0] = (uint8_t)((DTA_NATIVE_VERSION << 4) | DTA_NATIVE_KIND_REPORTS);
    buf[1] = (uint8_t)(((unsigned)priority << 6) | (retransmittable ? 0x20u : 0u));
    buf[2] = 0; /* count, updated per report */
    buf[3] = 0;
    dta_put_u32(buf + 4, reporter_id);
    dta_put_u32(buf + 8, seq);
    b->buf = buf;
    b->cap = cap;
    b->len = DTA_NATIVE_HEADER_LEN;
    b->count = 0;
    return DTA_OK;
}

/** Bytes of the datagram so far (header included). */
static inline size_t dta_native_len(const struct dta_native_builder *b) { return b->len; }

/** Room left for report bytes. */
static inline size_t dta_native_remaining(const struct dta_native_builder *b) { return b->cap - b->len; }

/** Sets the sequence number of the datagram being built (e.g. when reused). */
static inline void dta_native_set_seq(struct dta_native_builder *b, uint32_t seq)
{
    dta_put_u32(b->buf + 8, seq);
}

/* Checks room for a report of `body` bytes and writes its 4-byte header.
 * Returns a pointer to the body, or NULL with *rc set. */
static inline uint8_t *dta__native_reserve(struct dta_native_builder *b, uint8_t opcode, int immediate,
                                           unsigned redundancy, size_t key_len, size_t data_len,
                                           size_t body, int *rc)
{
    uint8_t *p;
    if (b->count >= DTA_NATIVE_MAX_REPORTS) {
        *rc = DTA_ERR_COUNT;
        return NULL;
    }
    if (b->cap - b->len < DTA_NATIVE_REPORT_HEADER_LEN + body) {
        *rc = DTA_ERR_NO_SPACE;
        return NULL;
    }
    p = b->buf + b->len;
    p[0] = opcode;
    p[1] = (uint8_t)((immediate ? 0x80u : 0u) | ((redundancy - 1u) & 0x03u));
    p[2] = (uint8_t)key_len;
    p[3] = (uint8_t)data_len;
    b->len += DTA_NATIVE_REPORT_HEADER_LEN + body;
    b->count += 1;
    b->buf[2] = (uint8_t)b->count;
    *rc = DTA_OK;
    return p + DTA_NATIVE_REPORT_HEADER_LEN;
}

static inline int dta__native_key_ok(const uint8_t *key, size_t key_len)
{
    return key != NULL && key_len >= DTA_NATIVE_MIN_KEY && key_len <= DTA_NATIVE_MAX_KEY;
}

static inline int dta__native_data_ok(const uint8_t *data, size_t data_len)
{
    return data != NULL && data_len >= DTA_NATIVE_MIN_DATA && data_len <= DTA_NATIVE_MAX_DATA;
}

/**
 * Key-Write report: key 1..=16 bytes, data 4..=64 bytes, redundancy 1..=4
 * ([DTA §4.1]). Returns the report's length in bytes.
 */
static inline int dta_native_key_write(struct dta_native_builder *b, int immediate, unsigned redundancy,
                                       const uint8_t *key, size_t key_len, const uint8_t *data,
                                       size_t data_len)
{
    int rc;
    uint8_t *p;
    if (b == NULL || b->buf == NULL) return DTA_ERR_NULL;
    if (redundancy < 1 || redundancy > DTA_MAX_REDUNDANCY) return DTA_ERR_RANGE;
    if (!dta__native_key_ok(key, key_len) || !dta__native_data_ok(data, data_len)) return DTA_ERR_RANGE;
    p = dta__native_reserve(b, DTA_OP_KEY_WRITE, immediate, redundancy, key_len, data_len,
                            key_len + data_len, &rc);
    if (p == NULL) return rc;
    memcpy(p, key, key_len);
    memcpy(p + key_len, data, data_len);
    return (int)(DTA_NATIVE_REPORT_HEADER_LEN + key_len + data_len);
}

/** Key-Increment report: key 1..=16 bytes, counter u64, redundancy 1..=4 ([DTA §4.3]). */
static inline int dta_native_key_increment(struct dta_native_builder *b, int immediate,
                                           unsigned redundancy, const uint8_t *key, size_t key_len,
                                           uint64_t counter)
{
    int rc;
    uint8_t *p;
    if (b == NULL || b->buf == NULL) return DTA_ERR_NULL;
    if (redundancy < 1 || redundancy > DTA_MAX_REDUNDANCY) return DTA_ERR_RANGE;
    if (!dta__native_key_ok(key, key_len)) return DTA_ERR_RANGE;
    p = dta__native_reserve(b, DTA_OP_KEY_INCREMENT, immediate, redundancy, key_len, 8, key_len + 8, &rc);
    if (p == NULL) return rc;
    memcpy(p, key, key_len);
    dta_put_u64(p + key_len, counter);
    return (int)(DTA_NATIVE_REPORT_HEADER_LEN + key_len + 8);
}

/** Append report: list_id u32, data 4..=64 bytes; key_len 0, redundancy 1 ([DTA §4.4]). */
static inline int dta_native_append(struct dta_native_builder *b, int immediate, uint32_t list_id,
                                    const uint8_t *data, size_t data_len)
{
    int rc;
    uint8_t *p;
    if (b == NULL || b->buf == NULL) return DTA_ERR_NULL;
    if (!dta__native_data_ok(data, data_len)) return DTA_ERR_RANGE;
    p = dta__native_reserve(b, DTA_OP_APPEND, immediate, 1, 0, data_len, 4 + data_len, &rc);
    if (p == NULL) return rc;
    dta_put_u32(p, list_id);
    memcpy(p + 4, data, data_len);
    return (int)(DTA_NATIVE_REPORT_HEADER_LEN + 4 + data_len);
}

/**
 * Postcarding report: key 1..=16 bytes, hop, path_len (0 = unknown), the
 * hop's 32-bit value; data_len 4, redundancy 1 ([DTA §4.2]).
 */
static inline int dta_native_postcard(struct dta_native_builder *b, int immediate, const uint8_t *key,
                                      size_t key_len, uint8_t hop, uint8_t path_len, uint32_t value)
{
    int rc;
    uint8_t *p;
    if (b == NULL || b->buf == NULL) return DTA_ERR_NULL;
    if (!dta__native_key_ok(key, key_len)) return DTA_ERR_RANGE;
    p = dta__native_reserve(b, DTA_OP_POSTCARDING, immediate, 1, key_len, 4, key_len + 6, &rc);
    if (p == NULL) return rc;
    memcpy(p, key, key_len);
    p[key_len] = hop;
    p[key_len + 1] = path_len;
    dta_put_u32(p + key_len + 2, value);
    return (int)(DTA_NATIVE_REPORT_HEADER_LEN + key_len + 6);
}

/**
 * Sketch-Merge report: one sketch column ([DTA-draft §3.1, §4.2]): sketch_id u16,
 * column u16, epoch u32, data 4..=64 bytes; key_len 0, redundancy 1. In order (0 first) for an
 * in-order store; any column, cumulative values, for a store with sync = "approsync".
 */
static inline int dta_native_sketch_merge(struct dta_native_builder *b, int immediate, uint16_t sketch_id,
                                          uint16_t column, uint32_t epoch, const uint8_t *data,
                                          size_t data_len)
{
    int rc;
    uint8_t *p;
    if (b == NULL || b->buf == NULL) return DTA_ERR_NULL;
    if (!dta__native_data_ok(data, data_len)) return DTA_ERR_RANGE;
    p = dta__native_reserve(b, DTA_OP_SKETCH_MERGE, immediate, 1, 0, data_len, 8 + data_len, &rc);
    if (p == NULL) return rc;
    dta_put_u16(p, sketch_id);
    dta_put_u16(p + 2, column);
    dta_put_u32(p + 4, epoch);
    memcpy(p + 8, data, data_len);
    return (int)(DTA_NATIVE_REPORT_HEADER_LEN + 8 + data_len);
}

/**
 * Native NACK (kind 1): the translator is missing datagram `seq`, and each
 * `seq + 1 + i` whose bit `1 << i` is set in `missing`; the reporter resends
 * each it still keeps. Or (count 1) the Sketch-Merge column to resend from.
 */
struct dta_native_nack {
    uint32_t reporter_id;
    uint32_t seq;        /* the (first) missing sequence number */
    int has_sketch;      /* count == 1: a Sketch-Merge body follows */
    uint16_t sketch_id;  /* valid when has_sketch */
    uint16_t column;
    uint32_t epoch;
    uint64_t missing;    /* count == 2: bit i set = seq + 1 + i missing too; else 0 */
};

/* Header checks shared by the NACK, notice and hello parsers, in dta-wire's order:
 * DTA_ERR_VERSION, DTA_ERR_TRUNCATED, DTA_ERR_KIND (kind > 3),
 * DTA_ERR_PRIORITY, DTA_ERR_KIND (not `kind`). */
static inline int dta__native_control_header(const uint8_t *buf, size_t len, unsigned kind)
{
    if (len < 1) return DTA_ERR_TRUNCATED;
    if ((buf[0] >> 4) != DTA_NATIVE_VERSION) return DTA_ERR_VERSION;
    if (len < DTA_NATIVE_HEADER_LEN) return DTA_ERR_TRUNCATED;
    if ((buf[0] & 0x0Fu) > DTA_NATIVE_KIND_HELLO) return DTA_ERR_KIND;
    if ((buf[1] >> 6) == 3) return DTA_ERR_PRIORITY;
    if ((buf[0] & 0x0Fu) != kind) return DTA_ERR_KIND;
    return DTA_OK;
}

/**
 * Parses a native NACK. Errors, checked in this order: DTA_ERR_VERSION,
 * DTA_ERR_TRUNCATED (shorter than the header), DTA_ERR_KIND (kind > 2),
 * DTA_ERR_PRIORITY, DTA_ERR_KIND (not a NACK), DTA_ERR_COUNT (count > 2),
 * DTA_ERR_TRUNCATED / DTA_ERR_TRAILING (body length). Reserved bits are
 * ignored.
 */
static inline int dta_native_nack_parse(const uint8_t *buf, size_t len, struct dta_native_nack *out)
{
    size_t need;
    int rc;
    if (buf == NULL || out == NULL) return DTA_ERR_NULL;
    memset(out, 0, sizeof *out);
    rc = dta__native_control_header(buf, len, DTA_NATIVE_KIND_NACK);
    if (rc != DTA_OK) return rc;
    if (buf[2] > 2) return DTA_ERR_COUNT;
    need = buf[2] == 1   ? DTA_NATIVE_NACK_SKETCH_LEN
           : buf[2] == 2 ? DTA_NATIVE_NACK_MISSING_LEN
                         : DTA_NATIVE_NACK_LEN;
    if (len < need) return DTA_ERR_TRUNCATED;
    if (len > need) return DTA_ERR_TRAILING;
    out->reporter_id = dta_get_u32(buf + 4);
    out->seq = dta_get_u32(buf + 8);
    out->has_sketch = buf[2] == 1;
    out->sketch_id = out->has_sketch ? dta_get_u16(buf + 12) : 0;
    out->column = out->has_sketch ? dta_get_u16(buf + 14) : 0;
    out->epoch = out->has_sketch ? dta_get_u32(buf + 16) : 0;
    out->missing = buf[2] == 2 ? dta_get_u64(buf + 12) : 0;
    return DTA_OK;
}

/**
 * Congestion notice (kind 2, translator -> reporter): for `hold_ms` from
 * receipt send at most `low_rate` low- and `medium_rate` medium-priority
 * datagrams per second (0: pause, DTA_RATE_UNLIMITED: no limit); high
 * priority is never limited; a newer notice replaces an older one.
 */
struct dta_notice {
    uint32_t reporter_id;
    uint32_t hold_ms;
    uint32_t low_rate;
    uint32_t medium_rate;
};

/**
 * Parses a congestion notice: the header checks of dta_native_nack_parse
 * (DTA_ERR_KIND when not a notice), then DTA_ERR_COUNT (count != 1),
 * DTA_ERR_TRUNCATED / DTA_ERR_TRAILING (not 24 bytes).
 */
static inline int dta_notice_parse(const uint8_t *buf, size_t len, struct dta_notice *out)
{
    int rc;
    if (buf == NULL || out == NULL) return DTA_ERR_NULL;
    memset(out, 0, sizeof *out);
    rc = dta__native_control_header(buf, len, DTA_NATIVE_KIND_NOTICE);
    if (rc != DTA_OK) return rc;
    if (buf[2] != 1) return DTA_ERR_COUNT;
    if (len < DTA_NATIVE_NOTICE_LEN) return DTA_ERR_TRUNCATED;
    if (len > DTA_NATIVE_NOTICE_LEN) return DTA_ERR_TRAILING;
    out->reporter_id = dta_get_u32(buf + 4);
    out->hold_ms = dta_get_u32(buf + 12);
    out->low_rate = dta_get_u32(buf + 16);
    out->medium_rate = dta_get_u32(buf + 20);
    return DTA_OK;
}

/** A hello (kind 3): the reporter announces its life, the number its control messages are
 * bound to (docs/protocol.md "Authenticated NACKs and notices"). */
struct dta_hello {
    uint32_t reporter_id;
    uint64_t life;
};

/** Encodes a hello into buf (Pri 2, high: a classifier keeps it under overload; R 0, count 0,
 * seq 0): DTA_NATIVE_HELLO_LEN or DTA_ERR_NO_SPACE. */
static inline int dta_hello_emit(uint8_t *buf, size_t cap, uint32_t reporter_id, uint64_t life)
{
    if (buf == NULL) return DTA_ERR_NULL;
    if (cap < DTA_NATIVE_HELLO_LEN) return DTA_ERR_NO_SPACE;
    memset(buf, 0, DTA_NATIVE_HELLO_LEN);
    buf[0] = (uint8_t)(DTA_NATIVE_VERSION << 4 | DTA_NATIVE_KIND_HELLO);
    buf[1] = 0x80u;
    dta_put_u32(buf + 4, reporter_id);
    dta_put_u64(buf + 12, life);
    return DTA_NATIVE_HELLO_LEN;
}

/**
 * Parses a hello: the header checks of dta_native_nack_parse (DTA_ERR_KIND when not a hello),
 * then DTA_ERR_COUNT (count != 0), DTA_ERR_TRUNCATED / DTA_ERR_TRAILING (not 20 bytes).
 */
static inline int dta_hello_parse(const uint8_t *buf, size_t len, struct dta_hello *out)
{
    int rc;
    if (buf == NULL || out == NULL) return DTA_ERR_NULL;
    memset(out, 0, sizeof *out);
    rc = dta__native_control_header(buf, len, DTA_NATIVE_KIND_HELLO);
    if (rc != DTA_OK) return rc;
    if (buf[2] != 0) return DTA_ERR_COUNT;
    if (len < DTA_NATIVE_HELLO_LEN) return DTA_ERR_TRUNCATED;
    if (len > DTA_NATIVE_HELLO_LEN) return DTA_ERR_TRAILING;
    out->reporter_id = dta_get_u32(buf + 4);
    out->life = dta_get_u64(buf + 12);
    return DTA_OK;
}

/* ------------------------------------------------------------------------ */
/* Loss and congestion: retransmission ring, NACKs, notices, tail probe      */
/* ------------------------------------------------------------------------ */
/*
 * The same behaviour as the Rust reporter (crates/engines/dta-reporter/src/flow.rs) and the Python
 * one, played from the same vectors (spec/vectors/reporter.json):
 *   - a retransmittable reporter keeps its newest datagrams in a ring over caller memory
 *     (struct dta_retransmit); a native NACK names `seq` and a bitmap of further missing
 *     numbers, and each one still kept is resent, `seq` first (selective repeat); a named
 *     number no longer kept is counted (unrecoverable_nacks), one not sent yet ignored. A
 *     prototype NACK resends from its seqnum to the newest (go-back-N). A repeat of the NACK
 *     for the same number within the hold-off is ignored (counted).
 *   - a congestion notice (struct dta_governor) limits low and medium priority for hold_ms:
 *     one token bucket each, holding at most 10 ms of its rate and at least one datagram,
 *     starting full, refilled continuously, kept in thousandths of a datagram; rate 0 pauses,
 *     DTA_RATE_UNLIMITED does not limit; high is never limited; a newer notice replaces the
 *     older; hold_ms 0 lifts. dta_may_send() never blocks: a datagram it refuses is not sent,
 *     takes no sequence number, and is counted (suppressed).
 *   - a NACK acted on (not a held-off repeat, not one naming only numbers not sent yet) slows
 *     the reporter down the same way for DTA_NACK_SLOWDOWN_MS unless limits are in force: low
 *     paused, medium at half its recent rate (datagrams dta_may_send() admitted in the current
 *     and the previous DTA_RATE_WINDOW_MS window, times 25, per second, at least 1); counted
 *     in nack_slowdowns. dta_on_control() does it when given the governor.
 *   - the tail probe: at the end of a run, resend the newest datagram DTA_DEFAULT_TAIL_PROBES
 *     times, DTA_DEFAULT_TAIL_PROBE_INTERVAL_MS apart, handling NACKs meanwhile (a lost last
 *     datagram leaves no gap the translator could NACK).
 * Times are milliseconds on any monotonic clock the caller keeps. Resends go through a
 * caller callback, so the logic runs without sockets.
 */

/** Defaults shared by every reporter (the Rust crate's dta_reporter::flow constants). */
#define DTA_DEFAULT_PRIORITY DTA_PRIORITY_MEDIUM
#define DTA_DEFAULT_RETRANSMIT_BUFFER 256
#define DTA_DEFAULT_TAIL_PROBES 2
#define DTA_DEFAULT_TAIL_PROBE_INTERVAL_MS 10
#define DTA_DEFAULT_NACK_HOLDOFF_MS 10
/** How long an acted-on NACK slows the reporter down, ms (dta_reporter::flow). */
#define DTA_NACK_SLOWDOWN_MS 20
/** The window the recent sending rate is counted over, ms (two of them). */
#define DTA_RATE_WINDOW_MS 10
/** Largest datagram a ring slot keeps: a 1500-byte MTU less IPv4 and UDP headers. */
#define DTA_MAX_DATAGRAM 1472

/** One kept datagram. */
struct dta_retransmit_slot {
    size_t len;
    uint8_t bytes[DTA_MAX_DATAGRAM];
};

/** Counters of the ring and of the NACK socket. */
struct dta_retransmit_stats {
    uint64_t datagrams;           /* datagrams kept (first transmissions) */
    uint64_t retransmissions;     /* datagrams resent on a NACK */
    uint64_t nacks;               /* NACKs for this reporter */
    uint64_t nacks_held_off;      /* NACKs ignored within the hold-off of the same one */
    uint64_t unrecoverable_nacks; /* numbers NACKed no longer kept */
    uint64_t bad_nacks;           /* malformed or foreign datagrams on the NACK socket */
    uint64_t tail_probes;         /* tail-probe resends */
    /* Control messages not obeyed (docs/security.md), by reason: */
    uint64_t control_wrong_source;      /* not from the translator's address and port */
    uint64_t control_unauthenticated;   /* no authenticator while a key is set */
    uint64_t control_bad_authenticator; /* an authenticator that does not verify */
    uint64_t control_replayed;          /* a counter already taken */
    uint64_t control_unbound;    /* bound to no life while this reporter announced one */
    uint64_t control_stale_life; /* bound to an earlier life of this reporter */
};

/**
 * The newest `cap` datagrams, consecutive in sequence number, in caller memory (`cap` slots;
 * 0 slots for a reporter that is not retransmittable: every NACKed number is then counted
 * unrecoverable). `seq_mask` is 0xFFFFFFFF for native numbers, 0xFF for the prototype's.
 */
struct dta_retransmit {
    struct dta_retransmit_slot *slots;
    size_t cap;
    size_t head;   /* slot the next datagram goes to */
    size_t filled; /* slots holding datagrams */
    uint32_t next_seq; /* number after the newest kept */
    uint32_t seq_mask;
    uint32_t holdoff_ms;
    int has_last_nack;
    uint32_t last_nack_seq;
    uint64_t last_nack_ms;
    int acted; /* the last NACK handled was acted on (passed the hold-off) */
    struct dta_retransmit_stats stats;
};

/** Sends one datagram for a resend; returns >= 0, or < 0 to stop and pass the error on. */
typedef int (*dta_send_fn)(void *ctx, const uint8_t *buf, size_t len);

/**
 * Initialises a ring over `slots[0 .. cap)` (may be NULL with cap 0). prototype: 8-bit
 * numbers. The hold-off starts at DTA_DEFAULT_NACK_HOLDOFF_MS.
 */
static inline int dta_retransmit_init(struct dta_retransmit *rt, struct dta_retransmit_slot *slots,
                                      size_t cap, int prototype)
{
    if (rt == NULL || (slots == NULL && cap != 0)) return DTA_ERR_NULL;
    memset(rt, 0, sizeof *rt);
    rt->slots = slots;
    rt->cap = cap;
    rt->seq_mask = prototype ? 0xFFu : 0xFFFFFFFFu;
    rt->holdoff_ms = DTA_DEFAULT_NACK_HOLDOFF_MS;
    return DTA_OK;
}

/**
 * Records datagram `seq` (just sent) as the newest. A number not following the newest
 * restarts the ring (kept datagrams must be consecutive). DTA_ERR_NO_SPACE when longer than
 * DTA_MAX_DATAGRAM (nothing kept).
 */
static inline int dta_retransmit_push(struct dta_retransmit *rt, uint32_t seq, const uint8_t *buf,
                                      size_t len)
{
    if (rt == NULL || buf == NULL) return DTA_ERR_NULL;
    if (len > DTA_MAX_DATAGRAM) return DTA_ERR_NO_SPACE;
    seq &= rt->seq_mask;
    if (rt->filled > 0 && seq != rt->next_seq) rt->filled = 0;
    rt->next_seq = (seq + 1u) & rt->seq_mask;
    rt->stats.datagrams += 1;
    if (rt->cap == 0) return DTA_OK;
    memcpy(rt->slots[rt->head].bytes, buf, len);
    rt->slots[rt->head].len = len;
    rt->head = (rt->head + 1) % rt->cap;
    if (rt->filled < rt->cap) rt->filled += 1;
    return DTA_OK;
}

/* How far back `seq` is from the next number: 0 = not sent yet (or ahead). */
static inline size_t dta__retransmit_back(const struct dta_retransmit *rt, uint32_t seq)
{
    uint32_t back = (rt->next_seq - seq) & rt->seq_mask;
    if (back == 0 || (uint64_t)back > ((uint64_t)rt->seq_mask + 1u) / 2u) return 0;
    return back;
}

/* The `back`-th newest kept datagram (1 = newest), resent and counted. */
static inline int dta__retransmit_resend(struct dta_retransmit *rt, size_t back, dta_send_fn send,
                                         void *ctx)
{
    const struct dta_retransmit_slot *s = &rt->slots[(rt->head + rt->cap - back) % rt->cap];
    int rc = send(ctx, s->bytes, s->len);
    if (rc < 0) return rc;
    rt->stats.retransmissions += 1;
    return DTA_OK;
}

/* 1 when a NACK for `seq` repeats the last honoured one within the hold-off (counted). */
static inline int dta__retransmit_held_off(struct dta_retransmit *rt, uint32_t seq, uint64_t now_ms)
{
    if (rt->has_last_nack && rt->last_nack_seq == seq && now_ms >= rt->last_nack_ms &&
        now_ms - rt->last_nack_ms < rt->holdoff_ms) {
        rt->stats.nacks_held_off += 1;
        return 1;
    }
    rt->has_last_nack = 1;
    rt->last_nack_seq = seq;
    rt->last_nack_ms = now_ms;
    return 0;
}

/**
 * Resends what a parsed native NACK (already checked to be this reporter's, without a
 * Sketch-Merge body) names: `seq`, then each bitmap number, those still kept. Returns the
 * number resent, or a negative send error.
 */
static inline int dta_on_nack(struct dta_retransmit *rt, const struct dta_native_nack *n,
                              uint64_t now_ms, dta_send_fn send, void *ctx)
{
    int resent = 0, rc;
    unsigned i;
    if (rt == NULL || n == NULL || send == NULL) return DTA_ERR_NULL;
    rt->stats.nacks += 1;
    rt->acted = 0;
    if (n->missing == 0 && dta__retransmit_back(rt, n->seq) == 0) return 0; /* nothing missing */
    if (dta__retransmit_held_off(rt, n->seq, now_ms)) return 0;
    rt->acted = 1;
    for (i = 0; i <= 64; i++) {
        uint32_t seq;
        size_t back;
        if (i > 0 && ((n->missing >> (i - 1)) & 1u) == 0) continue;
        seq = n->seq + i; /* i = 0: seq; bit i-1: seq + 1 + (i - 1) */
        back = dta__retransmit_back(rt, seq);
        if (back == 0) continue; /* not sent yet */
        if (back > rt->filled) {
            rt->stats.unrecoverable_nacks += 1;
            continue;
        }
        rc = dta__retransmit_resend(rt, back, send, ctx);
        if (rc < 0) return rc;
        resent++;
    }
    return resent;
}

/**
 * Prototype NACK (N bit set): resends every kept datagram from `seqnum` to the newest
 * (go-back-N). Returns the number resent, or a negative send error.
 */
static inline int dta_on_proto_nack(struct dta_retransmit *rt, uint8_t seqnum, uint64_t now_ms,
                                    dta_send_fn send, void *ctx)
{
    size_t back, k;
    int rc;
    if (rt == NULL || send == NULL) return DTA_ERR_NULL;
    rt->stats.nacks += 1;
    rt->acted = 0;
    back = dta__retransmit_back(rt, seqnum);
    if (back == 0) return 0;
    if (back > rt->filled) {
        rt->stats.unrecoverable_nacks += 1;
        return 0;
    }
    if (dta__retransmit_held_off(rt, seqnum, now_ms)) return 0;
    rt->acted = 1;
    for (k = back; k >= 1; k--) {
        rc = dta__retransmit_resend(rt, k, send, ctx);
        if (rc < 0) return rc;
    }
    return (int)back;
}

/** Resends the newest kept datagram once (one tail probe). Returns 1, 0 if none, or < 0. */
static inline int dta_tail_probe(struct dta_retransmit *rt, dta_send_fn send, void *ctx)
{
    int rc;
    if (rt == NULL || send == NULL) return DTA_ERR_NULL;
    if (rt->filled == 0) return 0;
    rc = send(ctx, rt->slots[(rt->head + rt->cap - 1) % rt->cap].bytes,
              rt->slots[(rt->head + rt->cap - 1) % rt->cap].len);
    if (rc < 0) return rc;
    rt->stats.tail_probes += 1;
    return 1;
}

/** One limited priority's token bucket, in thousandths of a datagram. */
struct dta_bucket {
    uint32_t rate;
    uint64_t tokens;
    uint64_t last_ms;
};

/** The limits of the last congestion notice, and what they refused. */
struct dta_governor {
    int limited;
    uint64_t until_ms;
    struct dta_bucket low, medium;
    uint64_t window_ms, in_window, last_window; /* the recent rate */
    uint64_t notices;        /* notices for this reporter obeyed */
    uint64_t nack_slowdowns; /* acted-on NACKs that slowed the reporter down */
    uint64_t suppressed;     /* datagrams dta_may_send() refused */
};

/** No limits. */
static inline void dta_governor_init(struct dta_governor *g)
{
    if (g != NULL) memset(g, 0, sizeof *g);
}

static inline uint64_t dta__bucket_capacity(uint32_t rate)
{
    uint64_t c = (uint64_t)rate * 10u; /* 10 ms of the rate */
    return c < 1000u ? 1000u : c;      /* at least one datagram */
}

static inline void dta__bucket_start(struct dta_bucket *b, uint32_t rate, uint64_t now_ms)
{
    b->rate = rate;
    b->tokens = dta__bucket_capacity(rate);
    b->last_ms = now_ms;
}

static inline int dta__bucket_take(struct dta_bucket *b, uint64_t now_ms)
{
    uint64_t elapsed, cap;
    if (b->rate == 0) return 0;
    if (b->rate == DTA_RATE_UNLIMITED) return 1;
    elapsed = now_ms > b->last_ms ? now_ms - b->last_ms : 0;
    if (elapsed > 1000u) elapsed = 1000u; /* a full bucket never needs more; bounds the product */
    cap = dta__bucket_capacity(b->rate);
    b->tokens += (uint64_t)b->rate * elapsed;
    if (b->tokens > cap) b->tokens = cap;
    if (now_ms > b->last_ms) b->last_ms = now_ms;
    if (b->tokens < 1000u) return 0;
    b->tokens -= 1000u;
    return 1;
}

/** Obeys a parsed notice (already checked to be this reporter's), received at now_ms. */
static inline void dta_on_notice(struct dta_governor *g, const struct dta_notice *n, uint64_t now_ms)
{
    if (g == NULL || n == NULL) return;
    g->notices += 1;
    if (n->hold_ms == 0) {
        g->limited = 0;
        return;
    }
    g->limited = 1;
    g->until_ms = now_ms + n->hold_ms;
    dta__bucket_start(&g->low, n->low_rate, now_ms);
    dta__bucket_start(&g->medium, n->medium_rate, now_ms);
}

/* Starts a new rate window at now_ms once the current one is over. */
static inline void dta__governor_roll(struct dta_governor *g, uint64_t now_ms)
{
    if (now_ms >= g->window_ms + DTA_RATE_WINDOW_MS) {
        g->last_window = now_ms < g->window_ms + 2u * DTA_RATE_WINDOW_MS ? g->in_window : 0;
        g->in_window = 0;
        g->window_ms = now_ms;
    }
}

/**
 * An acted-on NACK received at now_ms: low paused, medium at half its recent rate, for
 * DTA_NACK_SLOWDOWN_MS, unless limits are in force. Returns 1 when it slowed down.
 */
static inline int dta_on_nack_slowdown(struct dta_governor *g, uint64_t now_ms)
{
    uint64_t half;
    if (g == NULL) return 0;
    if (g->limited && now_ms < g->until_ms) return 0;
    dta__governor_roll(g, now_ms);
    half = (g->in_window + g->last_window) * 25u; /* n in up to 20 ms: n * 50 /s, halved */
    if (half < 1u) half = 1u;
    if (half > DTA_RATE_UNLIMITED - 1u) half = DTA_RATE_UNLIMITED - 1u;
    g->limited = 1;
    g->until_ms = now_ms + DTA_NACK_SLOWDOWN_MS;
    dta__bucket_start(&g->low, 0, now_ms);
    dta__bucket_start(&g->medium, (uint32_t)half, now_ms);
    g->nack_slowdowns += 1;
    return 1;
}

/**
 * May a datagram of `priority` be sent at now_ms? 1: yes (its token taken); 0: no, counted
 * in `suppressed`: drop it without using a sequence number. Never blocks.
 */
static inline int dta_may_send(struct dta_governor *g, enum dta_priority priority, uint64_t now_ms)
{
    int ok;
    if (g == NULL) return 1;
    dta__governor_roll(g, now_ms);
    if (g->limited && now_ms >= g->until_ms) g->limited = 0;
    if (!g->limited || priority == DTA_PRIORITY_HIGH) {
        ok = 1;
    } else {
        ok = dta__bucket_take(priority == DTA_PRIORITY_LOW ? &g->low : &g->medium, now_ms);
    }
    if (ok) g->in_window += 1;
    else g->suppressed += 1;
    return ok;
}

/**
 * Handles one datagram received on the NACK socket: a native NACK for `reporter_id`
 * (dta_on_nack; a Sketch-Merge NACK is copied to *sketch when sketch is not NULL and
 * returns 0), a notice for it (dta_on_notice), or, for a prototype ring (seq_mask 0xFF), a
 * prototype NACK. Anything else, or another reporter's, is counted in bad_nacks. A NACK acted
 * on slows the reporter down (dta_on_nack_slowdown on g). Returns the number resent or a
 * negative send error. g may be NULL (notices then counted bad, no slowdown).
 */
static inline int dta_on_control(struct dta_retransmit *rt, struct dta_governor *g,
                                 uint32_t reporter_id, const uint8_t *buf, size_t len,
                                 uint64_t now_ms, dta_send_fn send, void *ctx,
                                 struct dta_native_nack *sketch)
{
    struct dta_native_nack n;
    struct dta_notice c;
    int rc;
    if (rt == NULL || buf == NULL || send == NULL) return DTA_ERR_NULL;
    if (rt->seq_mask == 0xFFu) {
        struct dta_proto_nack p;
        if (dta_proto_nack_parse(buf, len, &p) != DTA_OK) {
            rt->stats.bad_nacks += 1;
            return 0;
        }
        if (!p.nack) return 0;
        rc = dta_on_proto_nack(rt, p.seqnum, now_ms, send, ctx);
        if (rt->acted) dta_on_nack_slowdown(g, now_ms);
        return rc;
    }
    if (dta_native_nack_parse(buf, len, &n) == DTA_OK && n.reporter_id == reporter_id) {
        if (n.has_sketch) {
            rt->stats.nacks += 1;
            if (sketch != NULL) *sketch = n;
            return 0;
        }
        rc = dta_on_nack(rt, &n, now_ms, send, ctx);
        if (rt->acted) dta_on_nack_slowdown(g, now_ms);
        return rc;
    }
    if (g != NULL && dta_notice_parse(buf, len, &c) == DTA_OK && c.reporter_id == reporter_id) {
        dta_on_notice(g, &c, now_ms);
        return 0;
    }
    rt->stats.bad_nacks += 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Authenticated control messages (docs/protocol.md, docs/security.md)       */
/* ------------------------------------------------------------------------ */

/** Bytes of an authenticator: the translator's counter (u64) then the tag (u64), big-endian. */
#define DTA_AUTH_TRAILER_LEN 16
/** ... of one bound to a reporter's life: counter, life, tag (u64 each). */
#define DTA_AUTH_BOUND_TRAILER_LEN 24
/** The A bit of byte 1 (flags) of a native header: an authenticator follows the message. */
#define DTA_FLAG_AUTH 0x10u
/** The L bit of byte 1, with A: the authenticator holds the life the message is bound to. */
#define DTA_FLAG_LIFE 0x08u
/** A keyed reporter says hello at start and at least this often... */
#define DTA_HELLO_INTERVAL_MS 1000u
/** ... and again on a message bound to no life, at most this often. */
#define DTA_HELLO_RETRY_MS 100u

static inline uint64_t dta_rotl64(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

/**
 * SipHash-2-4 of buf[0 .. len) under the 16-byte key (Aumasson and Bernstein, the reference
 * algorithm; the MAC of authenticated control messages, as dta_wire::auth computes it).
 */
static inline uint64_t dta_siphash24(const uint8_t key[16], const uint8_t *buf, size_t len)
{
    uint64_t k0 = 0, k1 = 0, m, b = (uint64_t)len << 56;
    uint64_t v0, v1, v2, v3;
    size_t i, full = len & ~(size_t)7;
    int j;
    for (j = 7; j >= 0; j--) {
        k0 = (k0 << 8) | key[j];
        k1 = (k1 << 8) | key[8 + j];
    }
    v0 = k0 ^ 0x736f6d6570736575ULL;
    v1 = k1 ^ 0x646f72616e646f6dULL;
    v2 = k0 ^ 0x6c7967656e657261ULL;
    v3 = k1 ^ 0x7465646279746573ULL;
#define DTA_SIPROUND                                                                           \
    do {                                                                                       \
        v0 += v1; v1 = dta_rotl64(v1, 13); v1 ^= v0; v0 = dta_rotl64(v0, 32);                  \
        v2 += v3; v3 = dta_rotl64(v3, 16); v3 ^= v2;                                           \
        v0 += v3; v3 = dta_rotl64(v3, 21); v3 ^= v0;                                           \
        v2 += v1; v1 = dta_rotl64(v1, 17); v1 ^= v2; v2 = dta_rotl64(v2, 32);                  \
    } while (0)
    for (i = 0; i < full; i += 8) {
        m = 0;
        for (j = 7; j >= 0; j--) m = (m << 8) | buf[i + (size_t)j];
        v3 ^= m;
        DTA_SIPROUND;
        DTA_SIPROUND;
        v0 ^= m;
    }
    for (i = full; i < len; i++) b |= (uint64_t)buf[i] << (8 * (i - full));
    v3 ^= b;
    DTA_SIPROUND;
    DTA_SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    DTA_SIPROUND;
    DTA_SIPROUND;
    DTA_SIPROUND;
    DTA_SIPROUND;
#undef DTA_SIPROUND
    return v0 ^ v1 ^ v2 ^ v3;
}

/**
 * The counters of authenticated control messages a reporter took: the highest, and which of
 * the 64 below it were seen (the translator's threads draw counters from one sequence and send
 * independently, so messages may arrive out of order).
 */
struct dta_replay {
    int has_top;
    uint64_t top;
    uint64_t seen;
};

/** Takes counter c: 1, or 0 when it was seen or is more than 64 behind the highest. */
static inline int dta_replay_take(struct dta_replay *w, uint64_t c)
{
    uint64_t back;
    if (!w->has_top) {
        w->has_top = 1;
        w->top = c;
        w->seen = 1;
        return 1;
    }
    if (c > w->top) {
        uint64_t shift = c - w->top;
        w->seen = shift >= 64 ? 0 : w->seen << shift;
        w->seen |= 1;
        w->top = c;
        return 1;
    }
    back = w->top - c;
    if (back >= 64 || (w->seen & ((uint64_t)1 << back)) != 0) return 0;
    w->seen |= (uint64_t)1 << back;
    return 1;
}

/**
 * Authenticates the control message buf[0 .. len) in place with key and counter (and, when
 * life is not NULL, binds it to *life: the L bit, the life in the authenticator). Returns the
 * new length, or DTA_ERR_NO_SPACE when cap cannot hold the authenticator.
 */
static inline int dta_control_seal(const uint8_t key[16], uint8_t *buf, size_t len, size_t cap,
                                   uint64_t counter, const uint64_t *life)
{
    size_t t = life != NULL ? DTA_AUTH_BOUND_TRAILER_LEN : DTA_AUTH_TRAILER_LEN;
    if (key == NULL || buf == NULL) return DTA_ERR_NULL;
    if (len < DTA_NATIVE_HEADER_LEN || len + t > cap) return DTA_ERR_NO_SPACE;
    buf[1] = (uint8_t)(buf[1] | DTA_FLAG_AUTH | (life != NULL ? DTA_FLAG_LIFE : 0u));
    dta_put_u64(buf + len, counter);
    if (life != NULL) dta_put_u64(buf + len + 8, *life);
    dta_put_u64(buf + len + t - 8, dta_siphash24(key, buf, len + t - 8));
    return (int)(len + t);
}

/**
 * Checks an authenticated control message against key, the life this reporter announced
 * (NULL: none) and w: on success copies the message without its authenticator (and with its
 * A and L bits cleared) to out[0 .. *out_len) and returns DTA_OK; otherwise counts why in st
 * and returns DTA_ERR_KIND. Checks in order: the A bit ("unauthenticated"), the length and the
 * tag ("bad_authenticator"), the life ("unbound": bound to none; "stale_life": to another),
 * the counter ("replayed").
 */
static inline int dta_control_open(const uint8_t key[16], struct dta_replay *w,
                                   struct dta_retransmit_stats *st, const uint8_t *buf,
                                   size_t len, uint8_t *out, size_t *out_len,
                                   const uint64_t *life)
{
    uint64_t counter, tag;
    size_t body, t;
    int bound;
    if (len < 2 || (buf[1] & DTA_FLAG_AUTH) == 0) {
        st->control_unauthenticated += 1;
        return DTA_ERR_KIND;
    }
    bound = (buf[1] & DTA_FLAG_LIFE) != 0;
    t = bound ? DTA_AUTH_BOUND_TRAILER_LEN : DTA_AUTH_TRAILER_LEN;
    if (len < DTA_NATIVE_HEADER_LEN + t || len > 64) {
        st->control_bad_authenticator += 1;
        return DTA_ERR_KIND;
    }
    body = len - t;
    counter = dta_get_u64(buf + body);
    tag = dta_get_u64(buf + len - 8);
    if (dta_siphash24(key, buf, len - 8) != tag) {
        st->control_bad_authenticator += 1;
        return DTA_ERR_KIND;
    }
    if (life != NULL && !bound) {
        st->control_unbound += 1;
        return DTA_ERR_KIND;
    }
    if (life != NULL && dta_get_u64(buf + body + 8) != *life) {
        st->control_stale_life += 1;
        return DTA_ERR_KIND;
    }
    if (!dta_replay_take(w, counter)) {
        st->control_replayed += 1;
        return DTA_ERR_KIND;
    }
    memcpy(out, buf, body);
    out[1] = (uint8_t)(out[1] & ~(DTA_FLAG_AUTH | DTA_FLAG_LIFE));
    *out_len = body;
    return DTA_OK;
}

/* ------------------------------------------------------------------------ */
/* Tiny UDP sender                                                           */
/* ------------------------------------------------------------------------ */

#ifndef DTA_NO_SOCKETS

/** A connected UDP socket to a translator, plus native-protocol identity. */
struct dta_reporter {
    int fd;
    uint32_t reporter_id; /* native protocol: this reporter's id */
    uint32_t next_seq;    /* native protocol: the next datagram's sequence number */
    int has_key;          /* control messages must be authenticated with key */
    uint8_t key[16];
    struct dta_replay replay;
    uint64_t life;          /* with a key: this run's life, announced in hellos */
    uint64_t hello_counter; /* the last hello's counter (wall-clock ns, increasing) */
    uint64_t last_hello_ms; /* dta_now_ms() of the last hello */
    uint64_t hellos;        /* hellos sent */
};

static inline int dta_send(struct dta_reporter *r, const uint8_t *buf, size_t len);
static inline uint64_t dta_now_ms(void);

/**
 * Sends the translator a sealed hello with this reporter's life (with a key; a no-op without).
 * Returns DTA_OK or DTA_ERR_SOCKET (errno set; ECONNREFUSED, nothing listening yet, is not an
 * error: the next hello tells it).
 */
static inline int dta_reporter_hello(struct dta_reporter *r)
{
    uint8_t b[DTA_NATIVE_HELLO_LEN + DTA_AUTH_TRAILER_LEN];
    struct timespec ts;
    uint64_t now_ns = 0;
    int n;
    if (r == NULL) return DTA_ERR_NULL;
    if (!r->has_key) return DTA_OK;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        now_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    r->hello_counter = now_ns > r->hello_counter ? now_ns : r->hello_counter + 1;
    n = dta_hello_emit(b, sizeof b, r->reporter_id, r->life);
    if (n < 0) return n;
    n = dta_control_seal(r->key, b, (size_t)n, sizeof b, r->hello_counter, NULL);
    if (n < 0) return n;
    r->last_hello_ms = dta_now_ms();
    if (dta_send(r, b, (size_t)n) < 0) return errno == ECONNREFUSED ? DTA_OK : DTA_ERR_SOCKET;
    r->hellos += 1;
    return DTA_OK;
}

/**
 * Sets the control key shared with the translator (`[translator] control_key_file`): from now
 * on dta_poll_control obeys only authenticated, fresh NACKs and notices bound to the life this
 * reporter draws here and announces in a hello (again at least every DTA_HELLO_INTERVAL_MS
 * from dta_poll_control), so nothing recorded before it started is obeyed (docs/security.md).
 * Returns DTA_OK, or DTA_ERR_SOCKET when the system gives no randomness or the hello cannot be
 * sent (errno set).
 */
static inline int dta_reporter_set_control_key(struct dta_reporter *r, const uint8_t key[16])
{
    ssize_t got;
    memcpy(r->key, key, 16);
    r->has_key = 1;
    memset(&r->replay, 0, sizeof r->replay);
    do {
        got = getrandom(&r->life, sizeof r->life, 0);
    } while (got < 0 && errno == EINTR);
    if (got != (ssize_t)sizeof r->life) return DTA_ERR_SOCKET;
    return dta_reporter_hello(r);
}

/**
 * Opens a UDP socket connected to host:port (port 0 means DTA_PORT).
 * reporter_id is used by dta_reporter_begin() for native datagrams.
 * Returns DTA_OK, DTA_ERR_RESOLVE or DTA_ERR_SOCKET.
 */
static inline int dta_reporter_open(struct dta_reporter *r, const char *host, uint16_t port,
                                    uint32_t reporter_id)
{
    struct addrinfo hints, *res = NULL, *ai;
    char service[8];
    int fd = -1;
    unsigned p = port ? port : DTA_PORT;
    if (r == NULL || host == NULL) return DTA_ERR_NULL;
    r->fd = -1;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    /* Format the port without stdio. */
    {
        char tmp[8];
        int n = 0, i = 0;
        do {
            tmp[n++] = (char)('0' + p % 10);
            p /= 10;
        } while (p != 0);
        while (n > 0) service[i++] = tmp[--n];
        service[i] = '\0';
    }
    if (getaddrinfo(host, service, &hints, &res) != 0 || res == NULL) return DTA_ERR_RESOLVE;
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return DTA_ERR_SOCKET;
    r->fd = fd;
    r->reporter_id = reporter_id;
    r->next_seq = 0;
    r->has_key = 0;
    memset(&r->replay, 0, sizeof r->replay);
    r->life = 0;
    r->hello_counter = 0;
    r->last_hello_ms = 0;
    r->hellos = 0;
    return DTA_OK;
}

/**
 * Sends one datagram. Returns the number of bytes sent or DTA_ERR_SOCKET (errno set). An
 * earlier datagram's ICMP port unreachable, pending on the socket, refuses one send without
 * sending anything (ECONNREFUSED): it is tried once more, so only a translator that is not
 * listening now loses the datagram.
 */
static inline int dta_send(struct dta_reporter *r, const uint8_t *buf, size_t len)
{
    ssize_t n;
    int tries = 0;
    if (r == NULL || buf == NULL) return DTA_ERR_NULL;
    do {
        n = send(r->fd, buf, len, 0);
    } while (n < 0 && (errno == EINTR || (errno == ECONNREFUSED && tries++ == 0)));
    if (n < 0) return DTA_ERR_SOCKET;
    return (int)n;
}

/**
 * Starts a native datagram with this reporter's id and its next sequence
 * number, which is then incremented (wrapping, docs/protocol.md).
 */
static inline int dta_reporter_begin(struct dta_reporter *r, struct dta_native_builder *b, uint8_t *buf,
                                     size_t cap, enum dta_priority priority, int retransmittable)
{
    int rc;
    if (r == NULL) return DTA_ERR_NULL;
    rc = dta_native_begin(b, buf, cap, priority, retransmittable, r->reporter_id, r->next_seq);
    if (rc == DTA_OK) r->next_seq += 1u;
    return rc;
}

/** Sends a built native datagram (must hold at least one report). */
static inline int dta_send_native(struct dta_reporter *r, const struct dta_native_builder *b)
{
    if (b == NULL || b->buf == NULL) return DTA_ERR_NULL;
    if (b->count == 0) return DTA_ERR_COUNT;
    return dta_send(r, b->buf, b->len);
}

/**
 * Reports, and clears, an error the kernel recorded on the socket after a send
 * returned: an ICMP port unreachable for an earlier datagram (nothing listens
 * at the destination; the datagram is lost) is DTA_ERR_SOCKET with errno
 * ECONNREFUSED. Call it after the last send, when no later send would see it.
 */
static inline int dta_reporter_check(struct dta_reporter *r)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (r == NULL) return DTA_ERR_NULL;
    if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return DTA_ERR_SOCKET;
    if (err != 0) {
        errno = err;
        return DTA_ERR_SOCKET;
    }
    return DTA_OK;
}

/** Closes the socket. Safe to call twice. */
static inline void dta_reporter_close(struct dta_reporter *r)
{
    if (r != NULL && r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
}


/* ---- Loss and congestion over sockets ----------------------------------- */

/** Milliseconds on the monotonic clock (for dta_on_control, dta_may_send). */
static inline uint64_t dta_now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/**
 * Opens the socket the translator's NACKs and notices arrive on: UDP bound on the
 * wildcard address of `family` (AF_INET or AF_INET6), `port` (DTA_NACK_PORT normally; 0 for
 * an ephemeral one). Returns DTA_OK with *fd set, or DTA_ERR_SOCKET (errno set).
 */
static inline int dta_nack_open(int *fd, int family, uint16_t port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int s;
    if (fd == NULL) return DTA_ERR_NULL;
    *fd = -1;
    memset(&ss, 0, sizeof ss);
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        len = sizeof *a;
    }
    s = socket(ss.ss_family, SOCK_DGRAM, 0);
    if (s < 0) return DTA_ERR_SOCKET;
    if (bind(s, (struct sockaddr *)&ss, len) != 0) {
        int e = errno;
        close(s);
        errno = e;
        return DTA_ERR_SOCKET;
    }
    *fd = s;
    return DTA_OK;
}

/** dta_send_fn over a struct dta_reporter (ctx). */
static inline int dta_reporter_send_fn(void *ctx, const uint8_t *buf, size_t len)
{
    return dta_send((struct dta_reporter *)ctx, buf, len);
}

/**
 * Sends a built native datagram and keeps it in `rt` for resending (rt may be NULL for a
 * reporter that is not retransmittable). Returns the bytes sent or an error.
 */
static inline int dta_send_native_kept(struct dta_reporter *r, struct dta_retransmit *rt,
                                       const struct dta_native_builder *b)
{
    int rc = dta_send_native(r, b);
    if (rc >= 0 && rt != NULL) {
        int k = dta_retransmit_push(rt, dta_get_u32(b->buf + 8), b->buf, b->len);
        if (k < 0) return k;
    }
    return rc;
}

/** Whether a and b are the same address and port (IPv4, IPv6; IPv4-mapped IPv6 as IPv4). */
static inline int dta_same_peer(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    uint8_t ia[16], ib[16];
    uint16_t pa, pb;
    const struct sockaddr_storage *in[2] = {a, b};
    uint8_t *ip[2] = {ia, ib};
    uint16_t *port[2] = {&pa, &pb};
    int k;
    for (k = 0; k < 2; k++) {
        memset(ip[k], 0, 16);
        if (in[k]->ss_family == AF_INET) {
            const struct sockaddr_in *s4 = (const struct sockaddr_in *)in[k];
            ip[k][10] = 0xff;
            ip[k][11] = 0xff;
            memcpy(ip[k] + 12, &s4->sin_addr, 4);
            *port[k] = s4->sin_port;
        } else if (in[k]->ss_family == AF_INET6) {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)in[k];
            memcpy(ip[k], &s6->sin6_addr, 16);
            *port[k] = s6->sin6_port;
        } else {
            return 0;
        }
    }
    return pa == pb && memcmp(ia, ib, 16) == 0;
}

/**
 * Waits up to timeout_ms (0: does not wait) for datagrams on nack_fd and handles each with
 * dta_on_control for r's reporter id, resending through r. Only datagrams from the translator r
 * sends to are taken (others are counted in rt's control_wrong_source); with a control key
 * (dta_reporter_set_control_key) only authenticated, fresh ones (dta_control_open). Returns
 * the datagrams handled, or a negative error (DTA_ERR_SOCKET with errno).
 */
static inline int dta_poll_control(struct dta_reporter *r, int nack_fd, struct dta_retransmit *rt,
                                   struct dta_governor *g, int timeout_ms)
{
    uint8_t buf[64], plain[64];
    const uint8_t *msg;
    size_t msg_len;
    int handled = 0;
    if (r == NULL || rt == NULL) return DTA_ERR_NULL;
    if (r->has_key && dta_now_ms() - r->last_hello_ms >= DTA_HELLO_INTERVAL_MS &&
        dta_reporter_hello(r) != DTA_OK)
        return DTA_ERR_SOCKET;
    for (;;) {
        struct pollfd p;
        struct sockaddr_storage from, peer;
        socklen_t from_len, peer_len;
        ssize_t n;
        int rc;
        p.fd = nack_fd;
        p.events = POLLIN;
        p.revents = 0;
        rc = poll(&p, 1, handled == 0 ? timeout_ms : 0);
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) return DTA_ERR_SOCKET;
        if (rc == 0) return handled;
        from_len = sizeof from;
        n = recvfrom(nack_fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &from_len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == ECONNREFUSED)) continue;
        if (n < 0) return DTA_ERR_SOCKET;
        handled++;
        peer_len = sizeof peer;
        if (getpeername(r->fd, (struct sockaddr *)&peer, &peer_len) != 0 ||
            !dta_same_peer(&from, &peer)) {
            rt->stats.control_wrong_source += 1;
            continue;
        }
        msg = buf;
        msg_len = (size_t)n;
        if (r->has_key && rt->seq_mask != 0xFFu) {
            uint64_t unbound = rt->stats.control_unbound;
            if (dta_control_open(r->key, &r->replay, &rt->stats, buf, (size_t)n, plain,
                                 &msg_len, &r->life) != DTA_OK) {
                /* The translator has not heard this life (yet): say it again. */
                if (rt->stats.control_unbound != unbound &&
                    dta_now_ms() - r->last_hello_ms >= DTA_HELLO_RETRY_MS &&
                    dta_reporter_hello(r) != DTA_OK)
                    return DTA_ERR_SOCKET;
                continue;
            }
            msg = plain;
        } else if (rt->seq_mask != 0xFFu && n >= 2 && (buf[1] & DTA_FLAG_AUTH) != 0) {
            /* Signed by the translator, not checked (no key here): the message itself. */
            size_t t = (buf[1] & DTA_FLAG_LIFE) != 0 ? DTA_AUTH_BOUND_TRAILER_LEN
                                                      : DTA_AUTH_TRAILER_LEN;
            if ((size_t)n < DTA_NATIVE_HEADER_LEN + t) {
                rt->stats.bad_nacks += 1;
                continue;
            }
            memcpy(plain, buf, (size_t)n - t);
            plain[1] = (uint8_t)(plain[1] & ~(DTA_FLAG_AUTH | DTA_FLAG_LIFE));
            msg = plain;
            msg_len = (size_t)n - t;
        }
        rc = dta_on_control(rt, g, r->reporter_id, msg, msg_len, dta_now_ms(),
                            dta_reporter_send_fn, r, NULL);
        if (rc < 0) return rc;
    }
}

/**
 * The tail probe at the end of a retransmittable run: `probes` times, handle NACKs for
 * interval_ms, then resend the newest kept datagram (defaults DTA_DEFAULT_TAIL_PROBES,
 * DTA_DEFAULT_TAIL_PROBE_INTERVAL_MS). nack_fd < 0: no NACK socket (only waits). Returns the
 * probes sent or a negative error.
 */
static inline int dta_reporter_tail_probe(struct dta_reporter *r, int nack_fd,
                                          struct dta_retransmit *rt, struct dta_governor *g,
                                          unsigned probes, unsigned interval_ms)
{
    unsigned i;
    int sent = 0;
    if (r == NULL || rt == NULL) return DTA_ERR_NULL;
    if (rt->filled == 0) return 0;
    for (i = 0; i < probes; i++) {
        uint64_t end = dta_now_ms() + interval_ms;
        int rc;
        for (;;) {
            uint64_t now = dta_now_ms();
            if (now >= end) break;
            if (nack_fd >= 0) {
                rc = dta_poll_control(r, nack_fd, rt, g, (int)(end - now));
                if (rc < 0) return rc;
            } else {
                poll(NULL, 0, (int)(end - now));
            }
        }
        rc = dta_tail_probe(rt, dta_reporter_send_fn, r);
        if (rc < 0) return rc;
        sent += rc;
    }
    return sent;
}

#endif /* DTA_NO_SOCKETS */

#ifdef __cplusplus
}
#endif

#endif /* DTA_REPORTER_H */
