/*
 * send_reports -- sends reports the example configuration (examples/dta.toml)
 * stores, one of every primitive the header encodes, and checks every send.
 *
 *   send_reports [HOST [PORT]]      (defaults: 127.0.0.1 40040)
 *
 * What it sends, and where examples/dta.toml puts it:
 *   prototype (short header) Key-Write key 10.0.0.1, data 00003039  -> store "kw"
 *   one native datagram of:
 *     Key-Write  5-tuple 10.0.0.1:8080-10.0.0.2:80/6, 8 data bytes   -> "flows"
 *     Key-Increment key 10.0.0.1 by 1500                              -> "counters"
 *     Append 00003039 to list 7                                       -> "events"
 *     Postcarding key 10.0.0.2, a 5-hop path of values 101..105       -> "paths"
 * Key-Write and Key-Increment use DTA_DEFAULT_REDUNDANCY copies, postcard
 * values are below DTA_DEFAULT_POSTCARD_VALUES. Exits 1 when anything fails,
 * including a destination where nothing listens (ICMP port unreachable).
 *
 * The native datagram is high priority and retransmittable: it is kept in a
 * retransmission ring, NACKs and congestion notices are read on the NACK socket
 * (DTA_NACK_PORT; when another program holds it, an ephemeral port, which the
 * translator does not send to), and the run ends with the tail probe (the newest
 * datagram resent twice, 10 ms apart: a lost last datagram leaves no gap the
 * translator could NACK; it drops the copies it already has).
 */
#include "dta/reporter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOPS 5
#define KEPT 8 /* ring slots; a long-running reporter keeps DTA_DEFAULT_RETRANSMIT_BUFFER */

static struct dta_retransmit_slot slots[KEPT];

static int fail(struct dta_reporter *r, const char *what, int rc)
{
    fprintf(stderr, "send_reports: %s: %s%s%s\n", what, dta_strerror(rc),
            rc == DTA_ERR_SOCKET ? ": " : "", rc == DTA_ERR_SOCKET ? strerror(errno) : "");
    dta_reporter_close(r);
    return 1;
}

int main(int argc, char **argv)
{
    const char *host = argc > 1 ? argv[1] : "127.0.0.1";
    uint16_t port = (uint16_t)(argc > 2 ? atoi(argv[2]) : DTA_PORT);
    struct dta_reporter r;
    struct dta_native_builder b;
    struct dta_proto_header ph = {DTA_PROTO_SHORT, 0, 0, 0};
    uint8_t proto[DTA_PROTO_MAX_LEN];
    uint8_t native[1400];
    const uint8_t flow[13] = {10, 0, 0, 1, 10, 0, 0, 2, 0x1F, 0x90, 0x00, 0x50, 6}; /* 5-tuple */
    const uint8_t flow_data[8] = {0, 0, 0, 0, 0, 0, 0x05, 0xDC};
    const uint8_t host1[4] = {10, 0, 0, 1};
    const uint8_t host2[4] = {10, 0, 0, 2};
    const uint8_t value[4] = {0, 0, 0x30, 0x39};
    struct dta_retransmit rt;
    struct dta_governor gov;
    int rc, proto_len, hop, probes, nack_fd = -1;

    rc = dta_reporter_open(&r, host, port, 1);
    if (rc != DTA_OK) {
        fprintf(stderr, "send_reports: open %s:%u: %s\n", host, (unsigned)port, dta_strerror(rc));
        return 1;
    }

    proto_len = dta_proto_key_write(proto, sizeof proto, &ph, DTA_DEFAULT_REDUNDANCY, 0x0A000001u,
                                    value, sizeof value);
    if (proto_len < 0) return fail(&r, "prototype Key-Write", proto_len);
    rc = dta_send(&r, proto, (size_t)proto_len);
    if (rc < 0) return fail(&r, "sending the prototype Key-Write", rc);

    dta_retransmit_init(&rt, slots, KEPT, 0);
    dta_governor_init(&gov);
    /* The translator sends NACKs and notices to this address's control port: without it this
     * reporter would obey nothing, so a port another process holds is an error, said. */
    if (dta_nack_open(&nack_fd, AF_INET, DTA_NACK_PORT) != DTA_OK)
        return fail(&r, "the control port 40044 (NACKs and congestion notices; another reporter "
                        "on this host?)", DTA_ERR_SOCKET);

    /* High priority is never limited by a congestion notice; low and medium ask first. */
    if (!dta_may_send(&gov, DTA_PRIORITY_HIGH, dta_now_ms())) return fail(&r, "notice", DTA_ERR_RANGE);
    rc = dta_reporter_begin(&r, &b, native, sizeof native, DTA_PRIORITY_HIGH, 1);
    if (rc < 0) return fail(&r, "native datagram", rc);
    rc = dta_native_key_write(&b, 0, DTA_DEFAULT_REDUNDANCY, flow, sizeof flow, flow_data,
                              sizeof flow_data);
    if (rc < 0) return fail(&r, "native Key-Write", rc);
    rc = dta_native_key_increment(&b, 0, DTA_DEFAULT_REDUNDANCY, host1, sizeof host1, 1500);
    if (rc < 0) return fail(&r, "native Key-Increment", rc);
    rc = dta_native_append(&b, 0, 7, value, sizeof value);
    if (rc < 0) return fail(&r, "native Append", rc);
    for (hop = 0; hop < HOPS; hop++) {
        rc = dta_native_postcard(&b, 0, host2, sizeof host2, (uint8_t)hop, HOPS, 101u + (uint32_t)hop);
        if (rc < 0) return fail(&r, "native Postcarding", rc);
    }
    rc = dta_send_native_kept(&r, &rt, &b);
    if (rc < 0) return fail(&r, "sending the native datagram", rc);
    probes = dta_reporter_tail_probe(&r, nack_fd, &rt, &gov, DTA_DEFAULT_TAIL_PROBES,
                                     DTA_DEFAULT_TAIL_PROBE_INTERVAL_MS);
    close(nack_fd);
    if (probes < 0) return fail(&r, "tail probe", probes);
    /* A refusal of the last datagram arrives after its send returned. */
    if (dta_reporter_check(&r) < 0) return fail(&r, "delivery", DTA_ERR_SOCKET);

    printf("sent to %s:%u:\n", host, (unsigned)port);
    printf("  prototype Key-Write key 10.0.0.1 data 00003039 (N=%d), %d bytes\n",
           DTA_DEFAULT_REDUNDANCY, proto_len);
    printf("  native datagram of %d bytes, %d reports:\n", rc, 3 + HOPS);
    printf("    Key-Write key 10.0.0.1:8080-10.0.0.2:80/6 data 00000000000005dc (N=%d)\n",
           DTA_DEFAULT_REDUNDANCY);
    printf("    Key-Increment key 10.0.0.1 by 1500 (N=%d)\n", DTA_DEFAULT_REDUNDANCY);
    printf("    Append list 7 entry 00003039\n");
    printf("    Postcarding key 10.0.0.2 path 101 102 103 104 105\n");
    printf("  (high priority, retransmittable: %d tail probes, %llu resent on NACKs)\n", probes,
           (unsigned long long)rt.stats.retransmissions);
    dta_reporter_close(&r);
    return 0;
}
