/*
 * C tests of the DTA C ABI (dta/dta.h, libdta): open a collector from a configuration written
 * here, ingest reports built with dta_encode_* and with the header-only reporter
 * (dta/reporter.h: what a C reporter sends over UDP), query them back, and check the errors
 * (bad path, bad datagram, unknown store) are codes with messages.
 * Prints "N checks, N failures".
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "dta/dta.h"
#define DTA_NO_SOCKETS
#include "dta/reporter.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,  \
                    __LINE__, #cond, dta_last_error());                              \
        }                                                                            \
    } while (0)

#define CHECK_RC(call, want)                                                         \
    do {                                                                             \
        int rc_ = (call);                                                            \
        checks++;                                                                    \
        if (rc_ != (want)) {                                                         \
            failures++;                                                              \
            fprintf(stderr, "%s:%d: %s == %s, expected %s (last error: %s)\n",       \
                    __FILE__, __LINE__, #call, dta_error_name(rc_),                  \
                    dta_error_name(want), dta_last_error());                         \
        }                                                                            \
    } while (0)

static const char CONFIG[] =
    "region_dir = \"regions\"\n"
    "[[store]]\nname = \"kw\"\nkind = \"key-write\"\nslots = 4096\nkey_len = 4\n"
    "data_len = 4\nredundancy = 2\n"
    /* Both hash schemes read back through the C ABI: native (kw), xxh3 (bytes, recent). */
    "[[store]]\nname = \"bytes\"\nkind = \"key-increment\"\ncounters = 4096\nkey_len = 4\n"
    "redundancy = 2\nhash = \"xxh3\"\n"
    "[[store]]\nname = \"recent\"\nkind = \"key-increment\"\ncounters = 4096\nkey_len = 6\n"
    "redundancy = 2\nwindows = 4\nwindow_ms = 60000\nhash = \"xxh3\"\n"
    "[[store]]\nname = \"paths\"\nkind = \"postcarding\"\nchunks = 4096\nhops = 5\n"
    "slot_bits = 32\nredundancy = 2\nkey_len = 4\nvalues = 1024\n"
    "[[store]]\nname = \"drops\"\nkind = \"append\"\nlists = 4\ncapacity = 1024\n"
    "entry_len = 4\nbatch = 4\n"
    "[[store]]\nname = \"cm\"\nkind = \"sketch-merge\"\nsketch_id = 1\nsketch = \"count-min\"\n"
    "rows = 2\ncolumns = 16\nreporters = 1\n"
    "[[store]]\nname = \"flows\"\nkind = \"sketch-merge\"\nsketch_id = 2\n"
    "sketch = \"count-min\"\nrows = 2\ncolumns = 16\nreporters = 1\nsync = \"approsync\"\n";

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

int main(void)
{
    char dir[] = "/tmp/dta-capi-XXXXXX";
    char path[256], cmd[300];
    FILE *f;
    dta_collector *c = NULL, *second = NULL;
    dta_header h = {7, 0, DTA_PRIORITY_MEDIUM, 0, 0};
    uint8_t buf[DTA_MAX_ENCODED], out[64], key[4] = {10, 0, 0, 1}, data[4] = {1, 2, 3, 4};
    size_t len = 0, n = 0, hops = 0;
    uint64_t count = 0, est = 0;
    uint32_t windows = 0;
    uint32_t path_out[8];
    dta_stats st;
    dta_list_read lr;
    unsigned i;

    /* The structs' layouts the library has (crates/front/dta-capi's tests check the same). */
    CHECK(sizeof(dta_header) == 12 && offsetof(dta_header, priority) == 8);
    CHECK(sizeof(dta_stats) == 8 * (1 + DTA_PRIMITIVES + 1 + DTA_REJECT_REASONS + 7));
    CHECK(offsetof(dta_stats, rejects) == 8 * (2 + DTA_PRIMITIVES));
    CHECK(sizeof(dta_list_read) == 32 && offsetof(dta_list_read, next_tail) == 16);

    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(path, sizeof path, "%s/dta.toml", dir);
    f = fopen(path, "w");
    if (!f || fputs(CONFIG, f) < 0 || fclose(f) != 0) {
        perror(path);
        return 2;
    }

    /* Bad path: a code and a message naming the file. */
    CHECK_RC(dta_collector_open("/nonexistent/dta.toml", &c), DTA_E_CONFIG);
    CHECK(strstr(dta_last_error(), "/nonexistent/dta.toml") != NULL);
    CHECK(c == NULL);
    CHECK_RC(dta_collector_open(NULL, &c), DTA_E_NULL);

    CHECK_RC(dta_collector_open(path, &c), DTA_E_OK);
    if (!c) {
        printf("%d checks, %d failures\n", checks, failures);
        return 1;
    }
    CHECK(strcmp(dta_last_error(), "") == 0);
    /* The directory is held: a second collector is refused. */
    CHECK_RC(dta_collector_open(path, &second), DTA_E_IO);

    /* Key-Write through the ABI's encoder. */
    CHECK_RC(dta_encode_key_write(&h, key, 4, data, 4, 2, buf, sizeof buf, &len), DTA_E_OK);
    CHECK_RC(dta_collector_ingest(c, buf, len), DTA_E_OK);
    /* Key-Increment through the header-only C reporter: the same wire format. */
    {
        struct dta_native_builder b;
        uint8_t k2[4] = {0, 0, 0, 9};
        CHECK_RC(dta_native_begin(&b, buf, sizeof buf, DTA_PRIORITY_MEDIUM, 0, 3, 1), DTA_OK);
        CHECK(dta_native_key_increment(&b, 0, 2, k2, 4, 1000) > 0);
        CHECK(dta_native_key_increment(&b, 0, 2, k2, 4, 500) > 0);
        CHECK_RC(dta_collector_ingest(c, buf, dta_native_len(&b)), DTA_E_OK);
        CHECK_RC(dta_query_key_increment(c, "bytes", k2, 4, &count), DTA_E_OK);
        CHECK(count == 1500);
        /* A cumulative store: no window but "all" (the default), which covers no window. */
        CHECK_RC(dta_query_key_increment_window(c, "bytes", k2, 4, NULL, &count, &windows),
                 DTA_E_OK);
        CHECK(count == 1500 && windows == 0);
        CHECK_RC(dta_query_key_increment_window(c, "bytes", k2, 4, "all", &count, &windows),
                 DTA_E_OK);
        CHECK_RC(dta_query_key_increment_window(c, "bytes", k2, 4, "current", &count, &windows),
                 DTA_E_INVALID);
        CHECK(strstr(dta_last_error(), "no windows") != NULL);
        CHECK_RC(dta_query_key_increment_window(c, "bytes", k2, 4, "soon", &count, &windows),
                 DTA_E_INVALID);
        /* A windowed store (6-byte keys): counted in the current window, one window covered. */
        {
            uint8_t k6[6] = {1, 2, 3, 4, 5, 6};
            h.seq++;
            CHECK_RC(dta_encode_key_increment(&h, k6, 6, 700, 2, buf, sizeof buf, &len),
                     DTA_E_OK);
            CHECK_RC(dta_collector_ingest(c, buf, len), DTA_E_OK);
            CHECK_RC(dta_query_key_increment_window(c, "recent", k6, 6, NULL, &count, &windows),
                     DTA_E_OK);
            CHECK(count == 700 && windows == 1);
            CHECK_RC(dta_query_key_increment_window(c, "recent", k6, 6, "last:3m", &count,
                                                    &windows),
                     DTA_E_OK);
            CHECK(count == 700 && windows >= 1);
            /* Longer than the store keeps (4 windows of a minute): answered with what it
             * holds, and said. */
            count = 0;
            CHECK_RC(dta_query_key_increment_window(c, "recent", k6, 6, "last:5m", &count,
                                                    &windows),
                     DTA_E_PARTIAL);
            CHECK(count == 700 && windows >= 1);
            CHECK(strstr(dta_last_error(), "keeps 4 windows of 1 min") != NULL);
            CHECK_RC(dta_query_key_increment_window(c, "recent", k6, 6, "last:5", &count,
                                                    &windows),
                     DTA_E_INVALID);
        }
    }
    /* A postcard path of 3 hops. */
    for (i = 0; i < 3; i++) {
        h.seq++;
        CHECK_RC(dta_encode_postcard(&h, key, 4, (uint8_t)i, 3, 100 + i, buf, sizeof buf, &len),
                 DTA_E_OK);
        CHECK_RC(dta_collector_ingest(c, buf, len), DTA_E_OK);
    }
    /* Five appends to list 2. */
    for (i = 0; i < 5; i++) {
        uint8_t e[4];
        put_be32(e, 0xd0d0 + i);
        CHECK_RC(dta_encode_append(&h, 2, e, 4, buf, sizeof buf, &len), DTA_E_OK);
        CHECK_RC(dta_collector_ingest(c, buf, len), DTA_E_OK);
    }
    /* A whole 2 x 16 Count-Min from the one reporter (id 0): key counted 42 times. */
    {
        uint32_t col0 = 0, col1 = 0;
        dta_header sh = {0, 0, DTA_PRIORITY_LOW, 0, 0};
        CHECK_RC(dta_sketch_cm_column(key, 4, 0, 16, &col0), DTA_E_OK);
        CHECK_RC(dta_sketch_cm_column(key, 4, 1, 16, &col1), DTA_E_OK);
        for (i = 0; i < 16; i++) {
            uint8_t col[8] = {0};
            if (i == col0) put_be32(col, 42);
            if (i == col1) put_be32(col + 4, 42);
            CHECK_RC(dta_encode_sketch_column(&sh, 1, (uint16_t)i, 1, col, 8, buf, sizeof buf,
                                              &len), DTA_E_OK);
            CHECK_RC(dta_collector_ingest(c, buf, len), DTA_E_OK);
        }
        /* The header of what was sent reads back. */
        {
            dta_header back;
            CHECK_RC(dta_datagram_header(buf, len, &back), DTA_E_OK);
            CHECK(back.reporter_id == 0 && back.priority == DTA_PRIORITY_LOW);
        }
    }
    CHECK_RC(dta_collector_flush(c), DTA_E_OK);

    CHECK_RC(dta_query_key_write(c, "kw", key, 4, 1, out, sizeof out, &n), DTA_E_OK);
    CHECK(n == 4 && memcmp(out, data, 4) == 0);
    CHECK_RC(dta_query_postcard_path(c, "paths", key, 4, path_out, 8, &hops), DTA_E_OK);
    CHECK(hops == 3 && path_out[0] == 100 && path_out[1] == 101 && path_out[2] == 102);
    CHECK_RC(dta_query_append_read(c, "drops", 2, DTA_TAIL_OLDEST, out, sizeof out, &lr),
             DTA_E_OK);
    CHECK(lr.entries == 5 && lr.entry_len == 4 && lr.missed == 0);
    CHECK(out[2] == 0xd0 && out[3] == 0xd0 && out[19] == 0xd4);
    CHECK_RC(dta_query_sketch(c, "cm", key, 4, &est), DTA_E_OK);
    CHECK(est == 42);

    /* Errors: bad datagram, unknown store, empty answer. */
    memset(buf, 0x20, 16);
    CHECK_RC(dta_collector_ingest(c, buf, 16), DTA_E_REJECTED);
    CHECK(strstr(dta_last_error(), "unknown_version") != NULL);
    CHECK_RC(dta_query_key_write(c, "nope", key, 4, 1, out, sizeof out, &n), DTA_E_UNKNOWN_STORE);
    CHECK(strstr(dta_last_error(), "nope") != NULL);
    CHECK_RC(dta_query_key_write(c, "bytes", key, 4, 1, out, sizeof out, &n), DTA_E_WRONG_KIND);
    key[3] = 99;
    CHECK_RC(dta_query_key_write(c, "kw", key, 4, 1, out, sizeof out, &n), DTA_E_EMPTY);
    CHECK(strlen(dta_last_error()) > 0);
    CHECK_RC(dta_encode_key_write(&h, key, 4, data, 4, 9, buf, sizeof buf, &len), DTA_E_INVALID);
    CHECK_RC(dta_encode_key_write(&h, key, 4, data, 4, 1, buf, 10, &len), DTA_E_NO_SPACE);

    CHECK_RC(dta_collector_stats(c, &st), DTA_E_OK);
    CHECK(st.rejected == 1);
    for (i = 0; i < DTA_REJECT_REASONS; i++) {
        if (st.rejects[i]) CHECK(strcmp(dta_reject_reason_name(i), "unknown_version") == 0);
    }
    /* Key-Increment: two native reports and one to the windowed store. */
    CHECK(st.reports[0] == 1 && st.reports[1] == 5 && st.reports[2] == 3 && st.reports[3] == 3 &&
          st.reports[4] == 16);
    CHECK(dta_reject_reason_name(DTA_REJECT_REASONS) == NULL);

    /* ApproSync: a switch counts a flow 5 times with theta 1 (due at 1, 2 and 4) and sends its
     * due columns only at the end; then a full resync. The store answers 5 both times. */
    {
        dta_approsync *s = NULL;
        uint8_t flow[4] = {10, 0, 0, 7}, col[8];
        uint16_t column = 0;
        size_t due = 0, sent = 0;
        int newly = 0, round, rc;
        CHECK_RC(dta_approsync_new(2, 16, 1.0, 2, 1, &s), DTA_E_OK);
        for (i = 0; i < 5; i++) CHECK_RC(dta_approsync_update(s, flow, 4, 1, &newly), DTA_E_OK);
        CHECK_RC(dta_query_sketch(c, "flows", flow, 4, &est), DTA_E_NOT_MERGED);
        for (round = 0; round < 2; round++) {
            CHECK_RC(dta_approsync_due(s, &due), DTA_E_OK);
            CHECK(due >= 1 && due <= (round ? 16u : 2u));
            while ((rc = dta_approsync_next_due(s, &column, col, sizeof col, &n)) == DTA_E_OK) {
                CHECK(n == 8 && column < 16);
                CHECK_RC(dta_encode_sketch_column(&h, 2, column, 1, col, n, buf, sizeof buf,
                                                  &len), DTA_E_OK);
                CHECK_RC(dta_collector_ingest(c, buf, len), DTA_E_OK);
                sent++;
            }
            CHECK(rc == DTA_E_EMPTY);
            CHECK_RC(dta_query_sketch(c, "flows", flow, 4, &est), DTA_E_OK);
            CHECK(est == 5);
            CHECK_RC(dta_approsync_mark_all_due(s), DTA_E_OK);
        }
        CHECK(sent >= 17);
        CHECK_RC(dta_approsync_estimate(s, flow, 4, &est), DTA_E_OK);
        CHECK(est == 5);
        CHECK_RC(dta_approsync_new(17, 16, 1.0, 2, 1, &s), DTA_E_INVALID);
        CHECK(strstr(dta_last_error(), "rows") != NULL);
        dta_approsync_free(s);
    }
    CHECK_RC(dta_collector_close(c), DTA_E_OK);
    CHECK_RC(dta_collector_close(NULL), DTA_E_OK);

    /* Reopened: the region files kept the data. */
    CHECK_RC(dta_collector_open(path, &c), DTA_E_OK);
    if (c) {
        key[3] = 1;
        CHECK_RC(dta_query_key_write(c, "kw", key, 4, 1, out, sizeof out, &n), DTA_E_OK);
        CHECK_RC(dta_collector_close(c), DTA_E_OK);
    }

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
