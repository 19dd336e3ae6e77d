/*
 * send_reports -- sends one datagram of each kind to a DTA translator.
 *
 *   send_reports [HOST [PORT]]      (defaults: 127.0.0.1 40040)
 *
 * Sends a prototype Key-Write (short base header) and a native datagram
 * batching a Key-Write, a Key-Increment, an Append and a Postcarding report.
 */
#include "dta/reporter.h"

#include <stdio.h>
#include <stdlib.h>

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
    const uint8_t value[4] = {0, 0, 0x30, 0x39};
    int rc;

    rc = dta_reporter_open(&r, host, port, 1);
    if (rc != DTA_OK) {
        fprintf(stderr, "open %s:%u: %s\n", host, (unsigned)port, dta_strerror(rc));
        return 1;
    }

    rc = dta_proto_key_write(proto, sizeof proto, &ph, 2, 0x0A000001u, value, sizeof value);
    if (rc < 0 || dta_send(&r, proto, (size_t)rc) < 0) {
        fprintf(stderr, "prototype Key-Write: %s\n", dta_strerror(rc < 0 ? rc : DTA_ERR_SOCKET));
        dta_reporter_close(&r);
        return 1;
    }

    rc = dta_reporter_begin(&r, &b, native, sizeof native, DTA_PRIORITY_MEDIUM, 0);
    if (rc == DTA_OK) rc = dta_native_key_write(&b, 0, 2, flow, sizeof flow, value, sizeof value);
    if (rc >= 0) rc = dta_native_key_increment(&b, 0, 2, flow, sizeof flow, 1500);
    if (rc >= 0) rc = dta_native_append(&b, 1, 7, value, sizeof value);
    if (rc >= 0) rc = dta_native_postcard(&b, 0, flow, sizeof flow, 0, 5, 0x00000065u);
    if (rc >= 0) rc = dta_send_native(&r, &b);
    if (rc < 0) {
        fprintf(stderr, "native datagram: %s\n", dta_strerror(rc));
        dta_reporter_close(&r);
        return 1;
    }
    printf("sent a %d-byte prototype Key-Write and a %d-byte native datagram (4 reports) to %s:%u\n",
           DTA_PROTO_SHORT_LEN + 5 + (int)sizeof value, rc, host, (unsigned)port);
    dta_reporter_close(&r);
    return 0;
}
