/*
 * Pure-C unit tests for dta/reporter.h: byte layouts, bounds and error
 * codes, builder atomicity on failure, NACK parsing, and a loopback send.
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

int main(void)
{
    test_proto_layouts();
    test_proto_errors();
    test_proto_nack();
    test_native_builder();
    test_native_count_limit();
    test_native_nack();
    test_loopback_send();
    CHECK(strcmp(dta_strerror(DTA_ERR_NO_SPACE), "no_space") == 0);
    printf("%d checks, %d failures\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
