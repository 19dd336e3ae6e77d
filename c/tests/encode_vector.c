/*
 * encode_vector -- a small CLI over dta/reporter.h, driven by test_vectors.py.
 *
 * Encodes a datagram from fields given on the command line and prints it as
 * lower-case hex, or parses a NACK given as hex and prints its fields:
 *
 *   encode_vector proto short|long OPCODE IMM SEQNUM RETX FIELDS...
 *       key_write      RED KEY DATAHEX
 *       key_increment  RED KEY COUNTER
 *       append         LIST_ID DATAHEX(4 bytes)
 *       postcarding    KEY HOP DATA
 *   encode_vector native low|medium|high RETX REPORTER_ID SEQ [REPORT...]
 *       key_write      IMM RED KEYHEX DATAHEX
 *       key_increment  IMM RED KEYHEX COUNTER
 *       append         IMM LIST_ID DATAHEX
 *       postcarding    IMM KEYHEX HOP PATH_LEN VALUE
 *       sketch_merge   IMM SKETCH_ID COLUMN EPOCH DATAHEX
 *   encode_vector proto-nack HEX    -> "seqnum=N nack=0|1"
 *   encode_vector native-nack HEX   -> "reporter_id=N seq=N sketch=none|ID,COLUMN,EPOCH missing=HEX16"
 *   encode_vector notice HEX        -> "reporter_id=N hold_ms=N low_rate=N medium_rate=N"
 *
 * Numbers are decimal (or 0x-prefixed hex). On error it prints
 * "error: <reason>" to stderr and exits 2 (usage errors exit 64).
 */
#include "dta/reporter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_BUF 65536

static void usage(const char *msg)
{
    fprintf(stderr, "usage error: %s\n", msg);
    exit(64);
}

static void fail(int rc)
{
    fprintf(stderr, "error: %s\n", dta_strerror(rc));
    exit(2);
}

static unsigned long long num(const char *s, unsigned long long max)
{
    char *end;
    unsigned long long v;
    errno = 0;
    if (s[0] == '-') usage("negative number");
    v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0' || end == s) usage("bad number");
    if (v > max) usage("number too large");
    return v;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes hex into out (at most cap bytes); returns the length. */
static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s), i;
    if (n % 2 != 0) usage("odd-length hex");
    if (n / 2 > cap) usage("hex too long");
    for (i = 0; i < n / 2; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) usage("bad hex digit");
        out[i] = (uint8_t)(hi * 16 + lo);
    }
    return n / 2;
}

static void print_hex(const uint8_t *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) printf("%02x", p[i]);
    printf("\n");
}

static int need(int argc, int i, int k)
{
    if (i + k > argc) usage("missing fields");
    return i;
}

static int cmd_proto(int argc, char **argv)
{
    static uint8_t buf[MAX_BUF];
    uint8_t data[64];
    struct dta_proto_header h;
    const char *op;
    int rc;
    need(argc, 2, 5);
    if (strcmp(argv[2], "short") == 0) h.format = DTA_PROTO_SHORT;
    else if (strcmp(argv[2], "long") == 0) h.format = DTA_PROTO_LONG;
    else usage("base header must be short or long");
    op = argv[3];
    h.immediate = (int)num(argv[4], 1);
    h.seqnum = (uint8_t)num(argv[5], 255);
    h.retransmittable = (int)num(argv[6], 1);
    if (strcmp(op, "key_write") == 0) {
        size_t dl;
        need(argc, 7, 3);
        dl = unhex(argv[9], data, sizeof data);
        rc = dta_proto_key_write(buf, sizeof buf, &h, (uint8_t)num(argv[7], 255),
                                 (uint32_t)num(argv[8], 0xFFFFFFFFu), data, dl);
    } else if (strcmp(op, "key_increment") == 0) {
        need(argc, 7, 3);
        rc = dta_proto_key_increment(buf, sizeof buf, &h, (uint8_t)num(argv[7], 255),
                                     (uint32_t)num(argv[8], 0xFFFFFFFFu),
                                     (uint64_t)num(argv[9], 0xFFFFFFFFFFFFFFFFull));
    } else if (strcmp(op, "append") == 0) {
        need(argc, 7, 2);
        if (unhex(argv[8], data, sizeof data) != 4) usage("append data must be 4 bytes");
        rc = dta_proto_append(buf, sizeof buf, &h, (uint32_t)num(argv[7], 0xFFFFFFFFu), dta_get_u32(data));
    } else if (strcmp(op, "postcarding") == 0) {
        need(argc, 7, 3);
        rc = dta_proto_postcard(buf, sizeof buf, &h, (uint32_t)num(argv[7], 0xFFFFFFFFu),
                                (uint8_t)num(argv[8], 255), (uint32_t)num(argv[9], 0xFFFFFFFFu));
    } else {
        usage("unknown prototype opcode");
        return 64;
    }
    if (rc < 0) fail(rc);
    print_hex(buf, (size_t)rc);
    return 0;
}

static int cmd_native(int argc, char **argv)
{
    static uint8_t buf[MAX_BUF];
    uint8_t key[64], data[256];
    struct dta_native_builder b;
    enum dta_priority pri = DTA_PRIORITY_LOW; /* usage() exits; clang cannot know */
    int i, rc;
    need(argc, 2, 4);
    if (strcmp(argv[2], "low") == 0) pri = DTA_PRIORITY_LOW;
    else if (strcmp(argv[2], "medium") == 0) pri = DTA_PRIORITY_MEDIUM;
    else if (strcmp(argv[2], "high") == 0) pri = DTA_PRIORITY_HIGH;
    else usage("priority must be low, medium or high");
    rc = dta_native_begin(&b, buf, sizeof buf, pri, (int)num(argv[3], 1),
                          (uint32_t)num(argv[4], 0xFFFFFFFFu), (uint32_t)num(argv[5], 0xFFFFFFFFu));
    if (rc < 0) fail(rc);
    i = 6;
    while (i < argc) {
        const char *op = argv[i];
        int imm;
        need(argc, i + 1, 1);
        imm = (int)num(argv[i + 1], 1);
        if (strcmp(op, "key_write") == 0) {
            size_t kl, dl;
            need(argc, i + 2, 3);
            kl = unhex(argv[i + 3], key, sizeof key);
            dl = unhex(argv[i + 4], data, sizeof data);
            rc = dta_native_key_write(&b, imm, (unsigned)num(argv[i + 2], 255), key, kl, data, dl);
            i += 5;
        } else if (strcmp(op, "key_increment") == 0) {
            size_t kl;
            need(argc, i + 2, 3);
            kl = unhex(argv[i + 3], key, sizeof key);
            rc = dta_native_key_increment(&b, imm, (unsigned)num(argv[i + 2], 255), key, kl,
                                          (uint64_t)num(argv[i + 4], 0xFFFFFFFFFFFFFFFFull));
            i += 5;
        } else if (strcmp(op, "append") == 0) {
            size_t dl;
            need(argc, i + 2, 2);
            dl = unhex(argv[i + 3], data, sizeof data);
            rc = dta_native_append(&b, imm, (uint32_t)num(argv[i + 2], 0xFFFFFFFFu), data, dl);
            i += 4;
        } else if (strcmp(op, "postcarding") == 0) {
            size_t kl;
            need(argc, i + 2, 4);
            kl = unhex(argv[i + 2], key, sizeof key);
            rc = dta_native_postcard(&b, imm, key, kl, (uint8_t)num(argv[i + 3], 255),
                                     (uint8_t)num(argv[i + 4], 255), (uint32_t)num(argv[i + 5], 0xFFFFFFFFu));
            i += 6;
        } else if (strcmp(op, "sketch_merge") == 0) {
            size_t dl;
            need(argc, i + 2, 4);
            dl = unhex(argv[i + 5], data, sizeof data);
            rc = dta_native_sketch_merge(&b, imm, (uint16_t)num(argv[i + 2], 0xFFFF),
                                         (uint16_t)num(argv[i + 3], 0xFFFF),
                                         (uint32_t)num(argv[i + 4], 0xFFFFFFFFu), data, dl);
            i += 6;
        } else {
            usage("unknown native opcode");
            return 64;
        }
        if (rc < 0) fail(rc);
    }
    print_hex(buf, dta_native_len(&b));
    return 0;
}

static int cmd_proto_nack(int argc, char **argv)
{
    uint8_t buf[256];
    struct dta_proto_nack n;
    size_t len;
    int rc;
    need(argc, 2, 1);
    len = unhex(argv[2], buf, sizeof buf);
    rc = dta_proto_nack_parse(buf, len, &n);
    if (rc < 0) fail(rc);
    printf("seqnum=%u nack=%d\n", (unsigned)n.seqnum, n.nack ? 1 : 0);
    return 0;
}

static int cmd_native_nack(int argc, char **argv)
{
    uint8_t buf[256];
    struct dta_native_nack n;
    size_t len;
    int rc;
    need(argc, 2, 1);
    len = unhex(argv[2], buf, sizeof buf);
    rc = dta_native_nack_parse(buf, len, &n);
    if (rc < 0) fail(rc);
    printf("reporter_id=%lu seq=%lu ", (unsigned long)n.reporter_id, (unsigned long)n.seq);
    if (n.has_sketch)
        printf("sketch=%u,%u,%lu", (unsigned)n.sketch_id, (unsigned)n.column, (unsigned long)n.epoch);
    else
        printf("sketch=none");
    printf(" missing=%016llx\n", (unsigned long long)n.missing);
    return 0;
}

static int cmd_notice(int argc, char **argv)
{
    uint8_t buf[256];
    struct dta_notice n;
    size_t len;
    int rc;
    need(argc, 2, 1);
    len = unhex(argv[2], buf, sizeof buf);
    rc = dta_notice_parse(buf, len, &n);
    if (rc < 0) fail(rc);
    printf("reporter_id=%lu hold_ms=%lu low_rate=%lu medium_rate=%lu\n", (unsigned long)n.reporter_id,
           (unsigned long)n.hold_ms, (unsigned long)n.low_rate, (unsigned long)n.medium_rate);
    return 0;
}

static int cmd_hello(int argc, char **argv)
{
    uint8_t buf[256];
    struct dta_hello h;
    size_t len;
    int rc;
    need(argc, 2, 1);
    len = unhex(argv[2], buf, sizeof buf);
    rc = dta_hello_parse(buf, len, &h);
    if (rc < 0) fail(rc);
    printf("reporter_id=%lu life=%llu\n", (unsigned long)h.reporter_id,
           (unsigned long long)h.life);
    return 0;
}

/* seal KEY MESSAGE COUNTER LIFE|-: the sealed message's hex. */
static int cmd_seal(int argc, char **argv)
{
    uint8_t key[16], buf[64];
    uint64_t life;
    size_t len;
    int rc;
    need(argc, 2, 4);
    if (unhex(argv[2], key, sizeof key) != sizeof key) usage("a key is 16 bytes");
    len = unhex(argv[3], buf, sizeof buf);
    life = strtoull(argv[5], NULL, 10);
    rc = dta_control_seal(key, buf, len, sizeof buf, strtoull(argv[4], NULL, 10),
                          strcmp(argv[5], "-") == 0 ? NULL : &life);
    if (rc < 0) fail(rc);
    print_hex(buf, (size_t)rc);
    return 0;
}

/* open KEY HEX LIFE|-: "message=HEX counter=N", or the reason it was not taken. */
static int cmd_open(int argc, char **argv)
{
    static const char *reasons[] = {"unauthenticated", "bad_authenticator", "unbound",
                                    "stale_life", "replayed"};
    uint8_t key[16], buf[64], out[64];
    uint64_t life;
    struct dta_retransmit_stats st;
    struct dta_replay w;
    size_t len, out_len = 0, i;
    need(argc, 2, 3);
    memset(&st, 0, sizeof st);
    memset(&w, 0, sizeof w);
    if (unhex(argv[2], key, sizeof key) != sizeof key) usage("a key is 16 bytes");
    len = unhex(argv[3], buf, sizeof buf);
    life = strtoull(argv[4], NULL, 10);
    if (dta_control_open(key, &w, &st, buf, len, out, &out_len,
                         strcmp(argv[4], "-") == 0 ? NULL : &life) != DTA_OK) {
        const uint64_t counts[] = {st.control_unauthenticated, st.control_bad_authenticator,
                                   st.control_unbound, st.control_stale_life,
                                   st.control_replayed};
        for (i = 0; i < 5; i++)
            if (counts[i] != 0) fprintf(stderr, "error: %s\n", reasons[i]);
        return 2;
    }
    printf("message=");
    print_hex(out, out_len);
    printf("counter=%llu\n", (unsigned long long)w.top);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) usage("missing command");
    if (strcmp(argv[1], "proto") == 0) return cmd_proto(argc, argv);
    if (strcmp(argv[1], "native") == 0) return cmd_native(argc, argv);
    if (strcmp(argv[1], "proto-nack") == 0) return cmd_proto_nack(argc, argv);
    if (strcmp(argv[1], "native-nack") == 0) return cmd_native_nack(argc, argv);
    if (strcmp(argv[1], "notice") == 0) return cmd_notice(argc, argv);
    if (strcmp(argv[1], "hello") == 0) return cmd_hello(argc, argv);
    if (strcmp(argv[1], "seal") == 0) return cmd_seal(argc, argv);
    if (strcmp(argv[1], "open") == 0) return cmd_open(argc, argv);
    usage("unknown command");
    return 64;
}
