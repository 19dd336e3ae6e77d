/*
 * Pure-C unit tests for dta/reporter.h: byte layouts, bounds and error
 * codes, builder atomicity on failure, NACK parsing, a loopback send, the retransmission
 * ring's selective resend, congestion-notice buckets and the tail probe.
 */
#include "dta/reporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/time.h>
#include <stdio.h>

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_EQ(a, b)                                                                           \
    do {                                                                                         \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                    \
        checks++;                                                                                \
        if (va_ != vb_) {                                                                        \
            failures++;                                                                          \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, \
                    va_, #b, vb_);                                                               \
        }                                                                                        \
    } while (0)

static void test_proto_layouts(void)
{
    uint8_t buf[64];
    uint8_t data[28];
    struct dta_proto_header s = {DTA_PROTO_SHORT, 1, 0, 0};
    struct dta_proto_header l = {DTA_PROTO_LONG, 0, 0xAB, 1};
    size_t i;
    for (i = 0; i < sizeof data; i++) data[i] = (uint8_t)i;

    CHECK_EQ(dta_proto_key_write(buf, sizeof buf, &s, 2, 0x01020304u, data, 4), 11);
    {
        const uint8_t want[] = {0x01, 0x80, 0x02, 0x01, 0x02, 0x03, 0x04, 0, 1, 2, 3};
        CHECK(memcmp(buf, want, sizeof want) == 0);
    }
    CHECK_EQ(dta_proto_key_write(buf, sizeof buf, &l, 4, 7, data, 28), 3 + 5 + 28);
    CHECK_EQ(buf[0], 0x01);
    CHECK_EQ(buf[1], 0xAB);
    CHECK_EQ(buf[2], 0x40);
    CHECK_EQ(buf[3], 4);
    CHECK_EQ(buf[7], 7);
    CHECK_EQ(buf[8 + 27], 27);

    CHECK_EQ(dta_proto_key_increment(buf, sizeof buf, &s, 1, 0xDEADBEEFu, 0x0102030405060708ull), 15);
    {
        const uint8_t want[] = {0x03, 0x80, 0x01, 0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3, 4, 5, 6, 7, 8};
        CHECK(memcmp(buf, want, sizeof want) == 0);
    }
    CHECK_EQ(dta_proto_append(buf, sizeof buf, &l, 0x11223344u, 0x55667788u), 11);
    {
        const uint8_t want[] = {0x02, 0xAB, 0x40, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
        CHECK(memcmp(buf, want, sizeof want) == 0);
    }
    CHECK_EQ(dta_proto_postcard(buf, sizeof buf, &s, 9, 3, 0xCAFEBABEu), 11);
    {
        const uint8_t want[] = {0x04, 0x80, 0, 0, 0, 9, 3, 0xCA, 0xFE, 0xBA, 0xBE};
        CHECK(memcmp(buf, want, sizeof want) == 0);
    }
    CHECK_EQ(dta_proto_encode_header(buf, sizeof buf, DTA_OP_APPEND, &l), 3);
    CHECK_EQ(dta_proto_encode_header(buf, 2, DTA_OP_APPEND, &l), DTA_ERR_NO_SPACE);
    CHECK_EQ(dta_proto_encode_header(buf, sizeof buf, 0x05, &l), DTA_ERR_RANGE);
    CHECK_EQ(dta_proto_encode_header(buf, sizeof buf, 0x00, &s), DTA_ERR_RANGE);
}

static void test_proto_errors(void)
{
    uint8_t buf[64];
    uint8_t data[28] = {0};
    struct dta_proto_header s = {DTA_PROTO_SHORT, 0, 0, 0};
    struct dta_proto_header bad_seq = {DTA_PROTO_SHORT, 0, 1, 0};
    struct dta_proto_header bad_r = {DTA_PROTO_SHORT, 0, 0, 1};
    struct dta_proto_header bad_fmt = {(enum dta_proto_format)7, 0, 0, 0};
    size_t dl;

    /* Only 1, 3 or 7 data words. */
    for (dl = 0; dl <= 28; dl++) {
        int rc = dta_proto_key_write(buf, sizeof buf, &s, 1, 1, data, dl);
        if (dl == 4 || dl == 12 || dl == 28)
            CHECK_EQ(rc, (int)(2 + 5 + dl));
        else
            CHECK_EQ(rc, DTA_ERR_RANGE);
    }
    CHECK_EQ(dta_proto_key_write(buf, sizeof buf, &s, 0, 1, data, 4), DTA_ERR_RANGE);
    CHECK_EQ(dta_proto_key_write(buf, sizeof buf, &s, 5, 1, data, 4), DTA_ERR_RANGE);
    CHECK_EQ(dta_proto_key_increment(buf, sizeof buf, &s, 0, 1, 1), DTA_ERR_RANGE);
    CHECK_EQ(dta_proto_key_write(buf, sizeof buf, &bad_seq, 1, 1, data, 4), DTA_ERR_RANGE);
    CHECK_EQ(dta_proto_append(buf, sizeof buf, &bad_r, 1, 1), DTA_ERR_RANGE);
    CHECK_EQ(dta_proto_postcard(buf, sizeof buf, &bad_fmt, 1, 1, 1), DTA_ERR_RANGE);
    CHECK_EQ(dta_proto_key_write(buf, sizeof buf, NULL, 1, 1, data, 4), DTA_ERR_NULL);
    CHECK_EQ(dta_proto_key_write(buf, sizeof buf, &s, 1, 1, NULL, 4), DTA_ERR_NULL);

    /* Exact-fit succeeds, one byte short fails and writes nothing. */
    memset(buf, 0xEE, sizeof buf);
    CHECK_EQ(dta_proto_key_write(buf, 18, &s, 1, 1, data, 12), DTA_ERR_NO_SPACE);
    CHECK_EQ(buf[0], 0xEE);
    CHECK_EQ(dta_proto_key_write(buf, 19, &s, 1, 1, data, 12), 19);
    CHECK_EQ(dta_proto_key_increment(buf, 14, &s, 1, 1, 1), DTA_ERR_NO_SPACE);
    CHECK_EQ(dta_proto_key_increment(buf, 15, &s, 1, 1, 1), 15);
    CHECK_EQ(dta_proto_append(buf, 9, &s, 1, 1), DTA_ERR_NO_SPACE);
    CHECK_EQ(dta_proto_append(buf, 10, &s, 1, 1), 10);
    CHECK_EQ(dta_proto_postcard(buf, 10, &s, 1, 1, 1), DTA_ERR_NO_SPACE);
    CHECK_EQ(dta_proto_postcard(buf, 11, &s, 1, 1, 1), 11);
}

static void test_proto_nack(void)
{
    struct dta_proto_nack n;
    const uint8_t ok[] = {0x2A, 0x80};
    const uint8_t ack[] = {0xFF, 0x7F};
    CHECK_EQ(dta_proto_nack_parse(ok, 2, &n), DTA_OK);
    CHECK_EQ(n.seqnum, 42);
    CHECK_EQ(n.nack, 1);
    CHECK_EQ(dta_proto_nack_parse(ack, 2, &n), DTA_OK);
    CHECK_EQ(n.seqnum, 255);
    CHECK_EQ(n.nack, 0);
    CHECK_EQ(dta_proto_nack_parse(ok, 1, &n), DTA_ERR_TRUNCATED);
    CHECK_EQ(dta_proto_nack_parse(ok, 0, &n), DTA_ERR_TRUNCATED);
    {
        const uint8_t three[] = {1, 0x80, 0};
        CHECK_EQ(dta_proto_nack_parse(three, 3, &n), DTA_ERR_TRAILING);
    }
}

static void test_native_builder(void)
{
    uint8_t buf[128];
    uint8_t key[17], data[65];
    struct dta_native_builder b;
    size_t i;
    for (i = 0; i < sizeof key; i++) key[i] = (uint8_t)(0xA0 + i);
    for (i = 0; i < sizeof data; i++) data[i] = (uint8_t)i;

    CHECK_EQ(dta_native_begin(&b, buf, sizeof buf, DTA_PRIORITY_HIGH, 1, 0x01020304u, 0xFFFFFFFFu), DTA_OK);
    {
        const uint8_t want[] = {0x10, 0xA0, 0x00, 0x00, 1, 2, 3, 4, 0xFF, 0xFF, 0xFF, 0xFF};
        CHECK(memcmp(buf, want, sizeof want) == 0);
    }
    CHECK_EQ(dta_native_len(&b), 12);
    CHECK_EQ(dta_native_key_write(&b, 1, 4, key, 2, data, 4), 4 + 2 + 4);
    {
        const uint8_t want[] = {0x01, 0x83, 2, 4, 0xA0, 0xA1, 0, 1, 2, 3};
        CHECK(memcmp(buf + 12, want, sizeof want) == 0);
    }
    CHECK_EQ(buf[2], 1);
    CHECK_EQ(dta_native_key_increment(&b, 0, 1, key, 1, 0x0102030405060708ull), 4 + 1 + 8);
    {
        const uint8_t want[] = {0x03, 0x00, 1, 8, 0xA0, 1, 2, 3, 4, 5, 6, 7, 8};
        CHECK(memcmp(buf + 22, want, sizeof want) == 0);
    }
    CHECK_EQ(buf[2], 2);
    CHECK_EQ(dta_native_append(&b, 0, 0x00010002u, data, 4), 12);
    {
        const uint8_t want[] = {0x02, 0x00, 0, 4, 0, 1, 0, 2, 0, 1, 2, 3};
        CHECK(memcmp(buf + 35, want, sizeof want) == 0);
    }
    CHECK_EQ(dta_native_postcard(&b, 1, key, 3, 2, 5, 0xDEADBEEFu), 4 + 3 + 6);
    {
        const uint8_t want[] = {0x04, 0x80, 3, 4, 0xA0, 0xA1, 0xA2, 2, 5, 0xDE, 0xAD, 0xBE, 0xEF};
        CHECK(memcmp(buf + 47, want, sizeof want) == 0);
    }
    CHECK_EQ(dta_native_sketch_merge(&b, 0, 0x0102, 0x0304, 0x05060708u, data, 8), 4 + 8 + 8);
    {
        const uint8_t want[] = {0x05, 0x00, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4, 5, 6, 7};
        CHECK(memcmp(buf + 60, want, sizeof want) == 0);
    }
    CHECK_EQ(buf[2], 5);
    CHECK_EQ(dta_native_len(&b), 80);

    /* Out-of-range fields: nothing is written, the builder is unchanged. */
    CHECK_EQ(dta_native_key_write(&b, 0, 0, key, 2, data, 4), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_key_write(&b, 0, 5, key, 2, data, 4), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_key_write(&b, 0, 1, key, 0, data, 4), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_key_write(&b, 0, 1, key, 17, data, 4), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_key_write(&b, 0, 1, key, 1, data, 3), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_key_write(&b, 0, 1, key, 1, data, 65), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_key_write(&b, 0, 1, NULL, 1, data, 4), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_key_increment(&b, 0, 1, key, 17, 0), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_append(&b, 0, 1, data, 2), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_postcard(&b, 0, key, 0, 0, 0, 0), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_sketch_merge(&b, 0, 0, 0, 0, data, 65), DTA_ERR_RANGE);
    CHECK_EQ(dta_native_len(&b), 80);
    CHECK_EQ(buf[2], 5);

    /* 48 bytes left: a 48-byte report fits exactly, then nothing does. */
    CHECK_EQ(dta_native_remaining(&b), 48);
    CHECK_EQ(dta_native_key_write(&b, 0, 1, key, 16, data, 29), DTA_ERR_NO_SPACE);
    CHECK_EQ(dta_native_len(&b), 80);
    CHECK_EQ(dta_native_key_write(&b, 0, 1, key, 16, data, 28), 48);
    CHECK_EQ(dta_native_remaining(&b), 0);
    CHECK_EQ(dta_native_append(&b, 0, 1, data, 4), DTA_ERR_NO_SPACE);
    CHECK_EQ(buf[2], 6);

    CHECK_EQ(dta_native_begin(&b, buf, 11, DTA_PRIORITY_LOW, 0, 1, 1), DTA_ERR_NO_SPACE);
    CHECK_EQ(dta_native_begin(&b, buf, sizeof buf, (enum dta_priority)3, 0, 1, 1), DTA_ERR_RANGE);
}

static void test_native_count_limit(void)
{
    static uint8_t buf[12 + 256 * 9];
    uint8_t data[4] = {1, 2, 3, 4};
    uint8_t key[1] = {7};
    struct dta_native_builder b;
    int i;
    CHECK_EQ(dta_native_begin(&b, buf, sizeof buf, DTA_PRIORITY_MEDIUM, 0, 1, 2), DTA_OK);
    CHECK_EQ(buf[1], 0x40);
    for (i = 0; i < 255; i++) CHECK_EQ(dta_native_key_write(&b, 0, 1, key, 1, data, 4), 9);
    CHECK_EQ(buf[2], 255);
    CHECK_EQ(dta_native_key_write(&b, 0, 1, key, 1, data, 4), DTA_ERR_COUNT);
    CHECK_EQ(dta_native_len(&b), 12 + 255 * 9);
}

static void test_native_nack(void)
{
    struct dta_native_nack n;
    const uint8_t plain[] = {0x11, 0, 0, 0, 0, 0, 0, 9, 0, 0, 1, 0};
    const uint8_t sketch[] = {0x11, 0, 1, 0, 0, 0, 0, 9, 0, 0, 1, 0, 0, 3, 0, 4, 0, 0, 0, 5};
    uint8_t tmp[32];
    CHECK_EQ(dta_native_nack_parse(plain, sizeof plain, &n), DTA_OK);
    CHECK_EQ(n.reporter_id, 9);
    CHECK_EQ(n.seq, 256);
    CHECK_EQ(n.has_sketch, 0);
    CHECK_EQ(dta_native_nack_parse(sketch, sizeof sketch, &n), DTA_OK);
    CHECK_EQ(n.has_sketch, 1);
    CHECK_EQ(n.sketch_id, 3);
    CHECK_EQ(n.column, 4);
    CHECK_EQ(n.epoch, 5);
    CHECK_EQ(dta_native_nack_parse(plain, 11, &n), DTA_ERR_TRUNCATED);
    CHECK_EQ(dta_native_nack_parse(sketch, 19, &n), DTA_ERR_TRUNCATED);
    CHECK_EQ(dta_native_nack_parse(plain, 0, &n), DTA_ERR_TRUNCATED);
    memcpy(tmp, plain, sizeof plain);
    tmp[12] = 0;
    CHECK_EQ(dta_native_nack_parse(tmp, 13, &n), DTA_ERR_TRAILING);
    tmp[0] = 0x10; /* kind 0: reports, not a NACK */
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_KIND);
    tmp[0] = 0x21;
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_VERSION);
    tmp[0] = 0x11;
    tmp[2] = 3;
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_COUNT);
    tmp[2] = 2; /* a missing bitmap needs 8 more bytes */
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_TRUNCATED);
    tmp[0] = 0x12; /* a congestion notice is not a NACK */
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_KIND);
    tmp[0] = 0x13;
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_KIND);
    tmp[0] = 0x11;
    tmp[2] = 0;
    tmp[1] = 0xC0;
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_PRIORITY);
    tmp[0] = 0x10; /* bad priority is reported before "not a NACK" */
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_PRIORITY);
    tmp[0] = 0x12; /* kind 2 */
    tmp[1] = 0;
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_ERR_KIND);
    CHECK_EQ(dta_native_nack_parse(tmp, 5, &n), DTA_ERR_TRUNCATED);
    tmp[0] = 0x11;
    tmp[1] = 0x1F; /* reserved bits are ignored */
    CHECK_EQ(dta_native_nack_parse(tmp, 12, &n), DTA_OK);
}

static void test_loopback_send(void)
{
    struct sockaddr_in addr;
    socklen_t alen = sizeof addr;
    struct dta_reporter r;
    struct dta_native_builder b;
    uint8_t buf[64], got[128];
    uint8_t key[4] = {1, 2, 3, 4}, data[4] = {5, 6, 7, 8};
    struct timeval tv = {5, 0};
    ssize_t n;
    int rx = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(rx >= 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    CHECK_EQ(bind(rx, (struct sockaddr *)&addr, sizeof addr), 0);
    CHECK_EQ(getsockname(rx, (struct sockaddr *)&addr, &alen), 0);
    setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

    CHECK_EQ(dta_reporter_open(&r, "127.0.0.1", ntohs(addr.sin_port), 77), DTA_OK);
    CHECK_EQ(dta_reporter_begin(&r, &b, buf, sizeof buf, DTA_PRIORITY_LOW, 0), DTA_OK);
    CHECK_EQ(dta_send_native(&r, &b), DTA_ERR_COUNT); /* empty datagram is refused */
    CHECK_EQ(dta_native_key_write(&b, 0, 2, key, 4, data, 4), 12);
    CHECK_EQ(dta_send_native(&r, &b), 24);
    n = recv(rx, got, sizeof got, 0);
    CHECK_EQ(n, 24);
    CHECK(memcmp(got, buf, 24) == 0);
    CHECK_EQ(dta_get_u32(got + 4), 77);
    CHECK_EQ(dta_get_u32(got + 8), 0);
    /* The next datagram carries the next sequence number. */
    CHECK_EQ(dta_reporter_begin(&r, &b, buf, sizeof buf, DTA_PRIORITY_LOW, 0), DTA_OK);
    CHECK_EQ(dta_native_append(&b, 0, 3, data, 4), 12);
    CHECK_EQ(dta_send(&r, buf, dta_native_len(&b)), 24);
    n = recv(rx, got, sizeof got, 0);
    CHECK_EQ(n, 24);
    CHECK_EQ(dta_get_u32(got + 8), 1);
    dta_reporter_close(&r);
    dta_reporter_close(&r);
    CHECK_EQ(r.fd, -1);
    close(rx);

    CHECK_EQ(dta_reporter_open(&r, "no-such-host.invalid", 1, 0), DTA_ERR_RESOLVE);
}


/* A dta_send_fn that records the sequence numbers of what it is given. */
struct recorder {
    uint32_t seqs[64];
    int n;
};

static int record_seq(void *ctx, const uint8_t *buf, size_t len)
{
    struct recorder *rec = (struct recorder *)ctx;
    if (len >= DTA_NATIVE_HEADER_LEN && rec->n < 64) rec->seqs[rec->n++] = dta_get_u32(buf + 8);
    return (int)len;
}

static int refuse(void *ctx, const uint8_t *buf, size_t len)
{
    (void)ctx, (void)buf, (void)len;
    return DTA_ERR_SOCKET;
}

/* Builds native datagram `seq` (one Append) into buf; returns its length. */
static size_t native_dgram(uint8_t *buf, size_t cap, uint32_t seq)
{
    struct dta_native_builder b;
    uint8_t data[4] = {0, 0, 0, 0};
    dta_put_u32(data, seq);
    dta_native_begin(&b, buf, cap, DTA_PRIORITY_HIGH, 1, 5, seq);
    dta_native_append(&b, 0, 1, data, 4);
    return b.len;
}

static void test_retransmit_ring(void)
{
    static struct dta_retransmit_slot slots[4];
    struct dta_retransmit rt;
    struct dta_native_nack n;
    struct recorder rec;
    uint8_t buf[64], big[DTA_MAX_DATAGRAM + 1];
    uint32_t s;
    memset(big, 0, sizeof big);
    CHECK_EQ(dta_retransmit_init(&rt, NULL, 4, 0), DTA_ERR_NULL);
    CHECK_EQ(dta_retransmit_init(&rt, slots, 4, 0), DTA_OK);
    CHECK_EQ(rt.holdoff_ms, DTA_DEFAULT_NACK_HOLDOFF_MS);
    for (s = 0; s < 10; s++) CHECK_EQ(dta_retransmit_push(&rt, s, buf, native_dgram(buf, sizeof buf, s)), DTA_OK);
    CHECK_EQ(dta_retransmit_push(&rt, 10, big, sizeof big), DTA_ERR_NO_SPACE);
    CHECK_EQ(rt.filled, 4);
    CHECK_EQ(rt.stats.datagrams, 10);
    /* Kept: 6..9. NACK 5 with bits 0, 2, 4: 5 (gone), 6, 8, 10 (not sent yet). */
    memset(&n, 0, sizeof n);
    n.reporter_id = 5;
    n.seq = 5;
    n.missing = 0x15;
    rec.n = 0;
    CHECK_EQ(dta_on_nack(&rt, &n, 100, record_seq, &rec), 2);
    CHECK_EQ(rec.n, 2);
    CHECK_EQ(rec.seqs[0], 6);
    CHECK_EQ(rec.seqs[1], 8);
    CHECK_EQ(rt.stats.unrecoverable_nacks, 1);
    /* Repeated within the hold-off: ignored; after it: honoured. */
    CHECK_EQ(dta_on_nack(&rt, &n, 109, record_seq, &rec), 0);
    CHECK_EQ(rt.stats.nacks_held_off, 1);
    CHECK_EQ(dta_on_nack(&rt, &n, 110, record_seq, &rec), 2);
    CHECK_EQ(rt.stats.retransmissions, 4);
    /* The next number alone: nothing missing, and no hold-off recorded. */
    n.seq = 10;
    n.missing = 0;
    CHECK_EQ(dta_on_nack(&rt, &n, 111, record_seq, &rec), 0);
    /* A failing send is passed on. */
    n.seq = 9;
    CHECK_EQ(dta_on_nack(&rt, &n, 200, refuse, NULL), DTA_ERR_SOCKET);
    CHECK_EQ(rt.stats.nacks, 5);
    /* The tail probe resends the newest. */
    rec.n = 0;
    CHECK_EQ(dta_tail_probe(&rt, record_seq, &rec), 1);
    CHECK_EQ(rec.seqs[0], 9);
    CHECK_EQ(rt.stats.tail_probes, 1);
    /* A number that does not follow the newest restarts the ring. */
    CHECK_EQ(dta_retransmit_push(&rt, 20, buf, native_dgram(buf, sizeof buf, 20)), DTA_OK);
    CHECK_EQ(rt.filled, 1);
    /* Across the 32-bit wrap. */
    CHECK_EQ(dta_retransmit_init(&rt, slots, 4, 0), DTA_OK);
    for (s = 0xFFFFFFFEu; s != 2u; s++) dta_retransmit_push(&rt, s, buf, native_dgram(buf, sizeof buf, s));
    n.seq = 0xFFFFFFFFu;
    n.missing = 0x1;
    rec.n = 0;
    CHECK_EQ(dta_on_nack(&rt, &n, 0, record_seq, &rec), 2);
    CHECK_EQ(rec.seqs[0], 0xFFFFFFFFu);
    CHECK_EQ(rec.seqs[1], 0);
    /* No slots (not retransmittable): every named number is unrecoverable, nothing probed. */
    CHECK_EQ(dta_retransmit_init(&rt, NULL, 0, 0), DTA_OK);
    dta_retransmit_push(&rt, 0, buf, native_dgram(buf, sizeof buf, 0));
    n.seq = 0;
    n.missing = 0;
    CHECK_EQ(dta_on_nack(&rt, &n, 0, record_seq, &rec), 0);
    CHECK_EQ(rt.stats.unrecoverable_nacks, 1);
    CHECK_EQ(dta_tail_probe(&rt, record_seq, &rec), 0);
}

static void test_governor(void)
{
    struct dta_governor g;
    struct dta_notice c = {7, 100, 0, DTA_RATE_UNLIMITED};
    int i, sent;
    dta_governor_init(&g);
    CHECK(dta_may_send(&g, DTA_PRIORITY_LOW, 0));
    dta_on_notice(&g, &c, 10);
    CHECK(!dta_may_send(&g, DTA_PRIORITY_LOW, 10));
    CHECK(!dta_may_send(&g, DTA_PRIORITY_LOW, 109));
    CHECK(dta_may_send(&g, DTA_PRIORITY_MEDIUM, 50));
    CHECK(dta_may_send(&g, DTA_PRIORITY_HIGH, 50));
    CHECK(dta_may_send(&g, DTA_PRIORITY_LOW, 110)); /* the hold ended */
    CHECK_EQ(g.suppressed, 2);
    /* 1000/s: a burst of 10, then one per millisecond. */
    c.hold_ms = 1000;
    c.low_rate = 1000;
    dta_on_notice(&g, &c, 0);
    for (i = 0, sent = 0; i < 20; i++) sent += dta_may_send(&g, DTA_PRIORITY_LOW, 0);
    CHECK_EQ(sent, 10);
    CHECK(dta_may_send(&g, DTA_PRIORITY_LOW, 1));
    CHECK(!dta_may_send(&g, DTA_PRIORITY_LOW, 1));
    /* The largest finite rate over the longest hold does not overflow. */
    c.hold_ms = 0xFFFFFFFFu;
    c.low_rate = DTA_RATE_UNLIMITED - 1;
    dta_on_notice(&g, &c, 0);
    CHECK(dta_may_send(&g, DTA_PRIORITY_LOW, 0xFFFFFFFEull));
    /* hold_ms 0 lifts. */
    c.hold_ms = 0;
    dta_on_notice(&g, &c, 5);
    c.hold_ms = 1;
    CHECK(dta_may_send(&g, DTA_PRIORITY_LOW, 5));
    CHECK_EQ(g.notices, 4);
    CHECK(dta_may_send(NULL, DTA_PRIORITY_LOW, 0));
}

/* Over loopback: the last datagram is lost; a NACK for datagram 0 is waiting; the tail
 * probe answers the NACK within its first interval, then resends the newest twice. */
static void test_tail_probe_loopback(void)
{
    static struct dta_retransmit_slot slots[8];
    struct dta_retransmit rt;
    struct dta_governor g;
    struct sockaddr_in addr, nack_addr;
    socklen_t alen = sizeof addr;
    struct dta_reporter r;
    struct dta_native_builder b;
    uint8_t buf[64], got[128], data[4] = {5, 6, 7, 8}, nack[DTA_NATIVE_NACK_LEN];
    struct timeval tv = {5, 0};
    uint64_t t0;
    int nack_fd = -1, i;
    int rx = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(rx >= 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(rx, (struct sockaddr *)&addr, sizeof addr), 0);
    CHECK_EQ(getsockname(rx, (struct sockaddr *)&addr, &alen), 0);
    setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    CHECK_EQ(dta_nack_open(&nack_fd, AF_INET, 0), DTA_OK);
    alen = sizeof nack_addr;
    CHECK_EQ(getsockname(nack_fd, (struct sockaddr *)&nack_addr, &alen), 0);
    nack_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    CHECK_EQ(dta_reporter_open(&r, "127.0.0.1", ntohs(addr.sin_port), 9), DTA_OK);
    dta_retransmit_init(&rt, slots, 8, 0);
    dta_governor_init(&g);
    for (i = 0; i < 3; i++) {
        CHECK_EQ(dta_reporter_begin(&r, &b, buf, sizeof buf, DTA_PRIORITY_HIGH, 1), DTA_OK);
        CHECK_EQ(dta_native_append(&b, 0, 1, data, 4), 12);
        CHECK_EQ(dta_send_native_kept(&r, &rt, &b), 24);
        CHECK_EQ(recv(rx, got, sizeof got, 0), 24); /* received, or (the last) lost */
    }
    /* A NACK for datagram 0 (kind 1, count 0, reporter 9, seq 0). */
    memset(nack, 0, sizeof nack);
    nack[0] = 0x11;
    dta_put_u32(nack + 4, 9);
    CHECK_EQ(sendto(rx, nack, sizeof nack, 0, (struct sockaddr *)&nack_addr, sizeof nack_addr),
             (long long)sizeof nack);
    t0 = dta_now_ms();
    CHECK_EQ(dta_reporter_tail_probe(&r, nack_fd, &rt, &g, DTA_DEFAULT_TAIL_PROBES,
                                     DTA_DEFAULT_TAIL_PROBE_INTERVAL_MS),
             2);
    CHECK(dta_now_ms() - t0 >= 2 * DTA_DEFAULT_TAIL_PROBE_INTERVAL_MS);
    CHECK_EQ(recv(rx, got, sizeof got, 0), 24);
    CHECK_EQ(dta_get_u32(got + 8), 0);
    CHECK_EQ(recv(rx, got, sizeof got, 0), 24);
    CHECK_EQ(dta_get_u32(got + 8), 2);
    CHECK_EQ(recv(rx, got, sizeof got, 0), 24);
    CHECK_EQ(dta_get_u32(got + 8), 2);
    CHECK_EQ(rt.stats.retransmissions, 1);
    CHECK_EQ(rt.stats.tail_probes, 2);
    dta_reporter_close(&r);
    close(nack_fd);
    close(rx);
}

/* A congestion notice for reporter 9 pausing low and medium for a minute, authenticated with key
 * and counter when key is not NULL (as the translator seals it: dta_wire::auth). */
/* A notice pausing reporter 9 for a minute; sealed with key (and bound to *life) unless NULL. */
static size_t notice_msg(uint8_t *m, const uint8_t *key, uint64_t counter, const uint64_t *life)
{
    size_t n = 24;
    uint64_t tag;
    memset(m, 0, 64);
    m[0] = 0x12;
    m[2] = 1;
    dta_put_u32(m + 4, 9);
    dta_put_u32(m + 12, 60000);
    if (key == NULL) return n;
    if (life != NULL) return (size_t)dta_control_seal(key, m, n, 64, counter, life);
    /* Sealed by hand (docs/protocol.md), without the helper: counter, then the tag. */
    m[1] |= DTA_FLAG_AUTH;
    dta_put_u64(m + n, counter);
    tag = dta_siphash24(key, m, n + 8);
    dta_put_u64(m + n + 8, tag);
    return n + DTA_AUTH_TRAILER_LEN;
}

static void test_control_source_and_authentication(void)
{
    static const uint8_t ref_key[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    static const uint8_t key[16] = {0x42, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    static const uint8_t other[16] = {7};
    uint8_t msg[15], m[64];
    struct dta_retransmit rt;
    struct dta_governor g;
    struct dta_reporter r;
    struct sockaddr_in translator, forger, nack_addr;
    socklen_t alen = sizeof translator;
    int tx, fx, nack_fd = -1, i;
    size_t n;
    /* SipHash-2-4's reference vector (Appendix A of the paper). */
    for (i = 0; i < 15; i++) msg[i] = (uint8_t)i;
    CHECK(dta_siphash24(ref_key, msg, 15) == 0xa129ca6149be45e5ULL);

    tx = socket(AF_INET, SOCK_DGRAM, 0);
    fx = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(tx >= 0 && fx >= 0);
    memset(&translator, 0, sizeof translator);
    translator.sin_family = AF_INET;
    translator.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(tx, (struct sockaddr *)&translator, sizeof translator), 0);
    CHECK_EQ(getsockname(tx, (struct sockaddr *)&translator, &alen), 0);
    forger = translator;
    forger.sin_addr.s_addr = htonl(0x7f000009); /* 127.0.0.9 */
    forger.sin_port = 0;
    CHECK_EQ(bind(fx, (struct sockaddr *)&forger, sizeof forger), 0);
    CHECK_EQ(dta_nack_open(&nack_fd, AF_INET, 0), DTA_OK);
    alen = sizeof nack_addr;
    CHECK_EQ(getsockname(nack_fd, (struct sockaddr *)&nack_addr, &alen), 0);
    nack_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(dta_reporter_open(&r, "127.0.0.1", ntohs(translator.sin_port), 9), DTA_OK);
    dta_retransmit_init(&rt, NULL, 0, 0);
    dta_governor_init(&g);

    /* From another address: nothing changes, counted. */
    n = notice_msg(m, NULL, 0, NULL);
    CHECK_EQ(sendto(fx, m, n, 0, (struct sockaddr *)&nack_addr, sizeof nack_addr), (long long)n);
    CHECK_EQ(dta_poll_control(&r, nack_fd, &rt, &g, 5000), 1);
    CHECK_EQ(rt.stats.control_wrong_source, 1);
    CHECK_EQ(g.notices, 0);
    /* From the translator: obeyed. */
    CHECK_EQ(sendto(tx, m, n, 0, (struct sockaddr *)&nack_addr, sizeof nack_addr), (long long)n);
    CHECK_EQ(dta_poll_control(&r, nack_fd, &rt, &g, 5000), 1);
    CHECK_EQ(g.notices, 1);

    /* With a key: the reporter draws a life and says hello, sealed. */
    CHECK_EQ(dta_reporter_set_control_key(&r, key), DTA_OK);
    CHECK_EQ(r.hellos, 1);
    {
        uint8_t h[64];
        struct dta_hello hello;
        struct dta_replay fresh;
        long got = (long)recv(tx, h, sizeof h, 0);
        size_t plain_len = 0;
        uint8_t plain[64];
        memset(&fresh, 0, sizeof fresh);
        CHECK_EQ(got, DTA_NATIVE_HELLO_LEN + DTA_AUTH_TRAILER_LEN);
        CHECK_EQ(dta_control_open(key, &fresh, &rt.stats, h, (size_t)got, plain, &plain_len, NULL),
                 DTA_OK);
        CHECK_EQ(dta_hello_parse(plain, plain_len, &hello), DTA_OK);
        CHECK_EQ(hello.reporter_id, 9);
        CHECK(hello.life == r.life);
    }
    /* Unauthenticated, another key, then the real one, then its replay. */
    CHECK_EQ(sendto(tx, m, n, 0, (struct sockaddr *)&nack_addr, sizeof nack_addr), (long long)n);
    CHECK_EQ(dta_poll_control(&r, nack_fd, &rt, &g, 5000), 1);
    CHECK_EQ(rt.stats.control_unauthenticated, 1);
    n = notice_msg(m, other, 5, &r.life);
    CHECK_EQ(sendto(tx, m, n, 0, (struct sockaddr *)&nack_addr, sizeof nack_addr), (long long)n);
    CHECK_EQ(dta_poll_control(&r, nack_fd, &rt, &g, 5000), 1);
    CHECK_EQ(rt.stats.control_bad_authenticator, 1);
    n = notice_msg(m, key, 6, &r.life);
    for (i = 0; i < 2; i++) {
        CHECK_EQ(sendto(tx, m, n, 0, (struct sockaddr *)&nack_addr, sizeof nack_addr),
                 (long long)n);
        CHECK_EQ(dta_poll_control(&r, nack_fd, &rt, &g, 5000), 1);
    }
    CHECK_EQ(g.notices, 2);
    CHECK_EQ(rt.stats.control_replayed, 1);
    /* Recorded in an earlier life (another life, or none): not obeyed, counted; one bound to
     * none asks for another hello. */
    {
        uint64_t earlier = r.life ^ 1;
        n = notice_msg(m, key, 7, &earlier);
        CHECK_EQ(sendto(tx, m, n, 0, (struct sockaddr *)&nack_addr, sizeof nack_addr), (long long)n);
        CHECK_EQ(dta_poll_control(&r, nack_fd, &rt, &g, 5000), 1);
        CHECK_EQ(rt.stats.control_stale_life, 1);
        r.last_hello_ms = 0;
        n = notice_msg(m, key, 8, NULL);
        CHECK_EQ(sendto(tx, m, n, 0, (struct sockaddr *)&nack_addr, sizeof nack_addr), (long long)n);
        CHECK_EQ(dta_poll_control(&r, nack_fd, &rt, &g, 5000), 1);
        CHECK_EQ(rt.stats.control_unbound, 1);
        CHECK_EQ(g.notices, 2);
        CHECK(r.hellos >= 2);
    }
    dta_reporter_close(&r);
    close(nack_fd);
    close(tx);
    close(fx);
}

int main(void)
{
    test_proto_layouts();
    test_proto_errors();
    test_proto_nack();
    test_native_builder();
    test_native_count_limit();
    test_native_nack();
    test_loopback_send();
    test_retransmit_ring();
    test_governor();
    test_tail_probe_loopback();
    test_control_source_and_authentication();
    CHECK(strcmp(dta_strerror(DTA_ERR_NO_SPACE), "no_space") == 0);
    printf("%d checks, %d failures\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
