/*
 * reporter_vector -- plays one scenario of spec/vectors/reporter.json with the header's
 * loss and congestion logic (struct dta_retransmit, struct dta_governor, dta_on_control,
 * dta_may_send), no sockets: c/tests/test_reporter_vectors.py feeds it the scenario as lines
 * on stdin and compares what it prints with the vectors.
 *
 * Input:
 *   init PROTOTYPE(0|1) REPORTER_ID PRIORITY(0..2) RETRANSMITTABLE(0|1) RETRANSMIT_BUFFER
 *   send T_MS N         -- try to send N datagrams (one Append report each) at T_MS
 *   recv T_MS HEX       -- a datagram from the translator on the NACK socket at T_MS
 * Output, one line per step: "sent SEQ..." or "resent SEQ..." (the sequence numbers of
 * the datagrams that went out, in order), then "stats NAME=VALUE ...".
 */
#define DTA_NO_SOCKETS
#include "dta/reporter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 1024

static struct dta_retransmit_slot slots[MAX_SLOTS];
static int prototype;

/* dta_send_fn: prints the sequence number of each datagram "sent". */
static int record(void *ctx, const uint8_t *buf, size_t len)
{
    (void)ctx;
    if (prototype)
        printf(" %u", (unsigned)buf[1]);
    else if (len >= DTA_NATIVE_HEADER_LEN)
        printf(" %lu", (unsigned long)dta_get_u32(buf + 8));
    return (int)len;
}

static int unhex(const char *h, uint8_t *out, size_t cap)
{
    size_t n = strlen(h), i;
    if (n % 2 != 0 || n / 2 > cap) return -1;
    for (i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (uint8_t)v;
    }
    return (int)(n / 2);
}

int main(void)
{
    struct dta_retransmit rt;
    struct dta_governor g;
    char line[4096], cmd[16], arg[2048];
    unsigned long long t;
    unsigned proto = 0, reporter_id = 0, priority = 0, retransmittable = 0, cap = 0;
    uint32_t next_seq = 0;
    int ready = 0;

    dta_governor_init(&g);
    while (fgets(line, sizeof line, stdin) != NULL) {
        if (sscanf(line, "%15s", cmd) != 1) continue;
        if (strcmp(cmd, "init") == 0) {
            if (sscanf(line, "init %u %u %u %u %u", &proto, &reporter_id, &priority,
                       &retransmittable, &cap) != 5 || cap > MAX_SLOTS || priority > 2) {
                fprintf(stderr, "bad init line: %s", line);
                return 2;
            }
            prototype = proto != 0;
            if (dta_retransmit_init(&rt, slots, retransmittable ? cap : 0, prototype) != DTA_OK)
                return 2;
            ready = 1;
        } else if (!ready) {
            fprintf(stderr, "init first\n");
            return 2;
        } else if (strcmp(cmd, "send") == 0) {
            unsigned long n, k;
            if (sscanf(line, "send %llu %lu", &t, &n) != 2) return 2;
            printf("sent");
            for (k = 0; k < n; k++) {
                uint8_t buf[64];
                uint8_t data[4];
                int len;
                dta_put_u32(data, (uint32_t)k);
                if (!dta_may_send(&g, (enum dta_priority)priority, t)) continue;
                if (prototype) {
                    struct dta_proto_header h = {DTA_PROTO_LONG, 0, 0, 0};
                    h.seqnum = (uint8_t)next_seq;
                    h.retransmittable = (int)retransmittable;
                    len = dta_proto_append(buf, sizeof buf, &h, 1, dta_get_u32(data));
                } else {
                    struct dta_native_builder b;
                    if (dta_native_begin(&b, buf, sizeof buf, (enum dta_priority)priority,
                                         (int)retransmittable, reporter_id, next_seq) != DTA_OK)
                        return 2;
                    len = dta_native_append(&b, 0, 1, data, sizeof data);
                    len = len < 0 ? len : (int)b.len;
                }
                if (len < 0) return 2;
                record(NULL, buf, (size_t)len);
                if (dta_retransmit_push(&rt, next_seq, buf, (size_t)len) != DTA_OK) return 2;
                next_seq += 1;
            }
            printf("\n");
        } else if (strcmp(cmd, "recv") == 0) {
            uint8_t buf[1024];
            int len;
            if (sscanf(line, "recv %llu %2047s", &t, arg) != 2) return 2;
            len = unhex(arg, buf, sizeof buf);
            if (len < 0) return 2;
            printf("resent");
            if (dta_on_control(&rt, &g, reporter_id, buf, (size_t)len, t, record, NULL, NULL) < 0)
                return 2;
            printf("\n");
        } else {
            fprintf(stderr, "unknown line: %s", line);
            return 2;
        }
    }
    printf("stats datagrams=%llu retransmissions=%llu nacks=%llu nacks_held_off=%llu "
           "unrecoverable_nacks=%llu notices=%llu nack_slowdowns=%llu suppressed=%llu "
           "bad_nacks=%llu\n",
           (unsigned long long)rt.stats.datagrams, (unsigned long long)rt.stats.retransmissions,
           (unsigned long long)rt.stats.nacks, (unsigned long long)rt.stats.nacks_held_off,
           (unsigned long long)rt.stats.unrecoverable_nacks, (unsigned long long)g.notices,
           (unsigned long long)g.nack_slowdowns, (unsigned long long)g.suppressed,
           (unsigned long long)rt.stats.bad_nacks);
    return 0;
}
