/*
 * dta/dta.h: the C ABI of DTA (libdta.so / libdta.a, crate crates/front/dta-capi).
 *
 * Embeds a DTA collector and its co-located translator in the calling process:
 *   dta_collector_open(config)     reads a dta.toml as `dta collector --config` does, creates
 *                                  (or reopens) the stores' region files, and builds the
 *                                  shared-memory translator `dta translator` would run;
 *   dta_collector_ingest(datagram) applies one DTA datagram (the UDP payload a reporter sends)
 *                                  with the translator's validation and reject counting;
 *   dta_encode_*                   build such datagrams (one report each) into a caller buffer;
 *   dta_query_*                    answer as `dta query` does.
 * Every function returns 0 (DTA_E_OK) or a negative `enum dta_error`; after an error,
 * dta_last_error() is a message naming the cause. Nothing aborts or unwinds across the ABI.
 * A handle is used by one thread at a time. See docs/embedding.md.
 *
 * Build: `cargo build -p dta-capi --release` gives target/release/libdta.so and libdta.a
 * (link the static one with -lpthread -ldl -lm). The header is C99 and C++ (extern "C").
 */
#ifndef DTA_DTA_H
#define DTA_DTA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Status codes: 0 is success, every error is negative. dta_error_name() names them. */
enum dta_error {
    DTA_E_OK = 0,
    DTA_E_NULL = -1,          /* a required pointer is NULL */
    DTA_E_CONFIG = -2,        /* the configuration cannot be read or is invalid */
    DTA_E_IO = -3,            /* a region file or the region directory cannot be used, or
                                 another collector holds the directory */
    DTA_E_REJECTED = -4,      /* the translator rejected the datagram or some of its reports
                                 (each reject counted in dta_stats.rejects) */
    DTA_E_INVALID = -5,       /* an argument is out of range (key/data length, redundancy,
                                 priority, key length not the store's, ...) */
    DTA_E_NO_SPACE = -6,      /* the caller's buffer is too small */
    DTA_E_UNKNOWN_STORE = -7, /* no store of that name */
    DTA_E_WRONG_KIND = -8,    /* the store is of another primitive than the query's */
    DTA_E_EMPTY = -9,         /* nothing is stored for the key */
    DTA_E_AMBIGUOUS = -10,    /* the stored copies disagree: no answer */
    DTA_E_NOT_MERGED = -11,   /* a Sketch-Merge column the key reads is not merged yet */
    DTA_E_INTERNAL = -12,     /* an internal error was caught at the boundary (a bug) */
    DTA_E_PARTIAL = -13       /* the answer was written but covers only part of what was asked
                                 (a time range longer than the store keeps): dta_last_error()
                                 says what was asked and what is held */
};

/** The message of the last failed call on this thread ("" after a successful call). Valid
 *  until the next call into the library on this thread; never NULL. */
const char *dta_last_error(void);

/** A status code's name: "ok", "rejected", ... ("unknown_code" for others). */
const char *dta_error_name(int code);

/* ------------------------------------------------------------------------ */
/* The collector                                                              */
/* ------------------------------------------------------------------------ */

typedef struct dta_collector dta_collector;

/** Open the collector of the dta.toml at `config_toml_path`: take the region directory's
 *  collector and writer locks, create or reopen the stores' region files (a relative
 *  region_dir is relative to the file), and build a co-located translator over them. */
int dta_collector_open(const char *config_toml_path, dta_collector **out);

/** As dta_collector_open, with the region files in `region_dir` (created if missing) instead
 *  of the configuration's region_dir (NULL: the configuration's), as `--region-dir` does.
 *  Existing regions of the same geometry are reopened with their data: give a fresh
 *  directory for an empty start. */
int dta_collector_open_dir(const char *config_toml_path, const char *region_dir,
                           dta_collector **out);

/** Apply one DTA datagram (native or prototype protocol: exactly the UDP payload a reporter
 *  sends), as received from 127.0.0.1 (the default translator allow-list). DTA_E_REJECTED if
 *  the datagram or any of its reports was rejected; the others are applied. */
int dta_collector_ingest(dta_collector *c, const uint8_t *datagram, size_t len);

/** As dta_collector_ingest, received from src_ipv4:src_port (host byte order): the
 *  translator's allow-lists and sequence spaces see that source. */
int dta_collector_ingest_from(dta_collector *c, const uint8_t *datagram, size_t len,
                              uint32_t src_ipv4, uint16_t src_port);

/** Run the translator's timers against the wall clock (Append batches older than
 *  append_flush_ms, Postcarding paths older than postcard_timeout_ms are written). */
int dta_collector_tick(dta_collector *c);

/** Write out everything the translator holds (partial Append batches, partial Postcarding
 *  paths, Sketch-Merge columns not yet sent by every reporter) and flush the region files.
 *  Queries see every report ingested before it. */
int dta_collector_flush(dta_collector *c);

/** Reject reasons counted (the translator's reasons, docs/protocol.md). */
#define DTA_REJECT_REASONS 24
/** Primitives, in opcode order: key-write, append, key-increment, postcarding, sketch-merge. */
#define DTA_PRIMITIVES 5

/** The translator's counters. */
typedef struct dta_stats {
    uint64_t datagrams;                  /* datagrams ingested */
    uint64_t reports[DTA_PRIMITIVES];    /* reports parsed, by primitive (opcode order) */
    uint64_t rejected;                   /* datagrams and reports rejected, in total */
    uint64_t rejects[DTA_REJECT_REASONS];/* by reason: dta_reject_reason_name(i) */
    uint64_t postcard_chunks_complete;   /* Postcarding paths written with every hop */
    uint64_t postcard_chunks_timeout;    /* ... written at a timeout or flush, hops missing */
    uint64_t postcard_chunks_collision;  /* ... written early: another path needed the line */
    uint64_t sketch_columns_written;     /* Sketch-Merge columns written */
    uint64_t append_batches;             /* Append batches written */
    uint64_t lost;                       /* sequence numbers given up as never received (out
                                            of the tracker's window, or by its timer) */
    uint64_t duplicates;                 /* sequenced datagrams received again */
} dta_stats;

int dta_collector_stats(dta_collector *c, dta_stats *out);

/** The name of reject reason i (0..DTA_REJECT_REASONS-1), e.g. "no_store"; NULL beyond. */
const char *dta_reject_reason_name(size_t i);

/** Flush (as dta_collector_flush), unmap the regions and release the locks. NULL is ignored.
 *  Returns the flush's status; the handle is freed either way. */
int dta_collector_close(dta_collector *c);

/* ------------------------------------------------------------------------ */
/* Report builders: one native-protocol datagram holding one report           */
/* ------------------------------------------------------------------------ */

/** Largest datagram a dta_encode_* writes (header 12 + report header 4 + key 16 + data 64). */
#define DTA_MAX_ENCODED 96

/* Report priority ([DTA-draft §3.2]); also defined by dta/reporter.h, whichever comes first. */
#ifndef DTA_PRIORITY_DEFINED
#define DTA_PRIORITY_DEFINED
enum dta_priority { DTA_PRIORITY_LOW = 0, DTA_PRIORITY_MEDIUM = 1, DTA_PRIORITY_HIGH = 2 };
#endif

/** The datagram header of a report. */
typedef struct dta_header {
    uint32_t reporter_id;    /* the reporter (a switch); Sketch-Merge: 0..store reporters-1 */
    uint32_t seq;            /* sequence number in the reporter's space */
    uint8_t priority;        /* enum dta_priority */
    uint8_t retransmittable; /* non-zero: applied exactly once, gaps NACKed */
    uint8_t immediate;       /* non-zero: written with immediate (collector notified) */
} dta_header;

/* Each writes the datagram into buf[0..cap) and its length into *len_out; DTA_E_NO_SPACE if it
 * does not fit, DTA_E_INVALID for a field out of range (nothing written then). */

/** Key-Write: data (4..64 bytes) under key (1..16 bytes) in `redundancy` (1..4) slots. */
int dta_encode_key_write(const dta_header *h, const uint8_t *key, size_t key_len,
                         const uint8_t *data, size_t data_len, uint8_t redundancy,
                         uint8_t *buf, size_t cap, size_t *len_out);

/** Key-Increment: add `counter` to key's counters; redundancy must be the store's N. */
int dta_encode_key_increment(const dta_header *h, const uint8_t *key, size_t key_len,
                             uint64_t counter, uint8_t redundancy,
                             uint8_t *buf, size_t cap, size_t *len_out);

/** Postcarding: hop `hop` of flow `key` saw `value` (below the store's `values`); `path_len`
 *  is the path's hop count when known (the path is written once every hop arrived), else 0. */
int dta_encode_postcard(const dta_header *h, const uint8_t *key, size_t key_len, uint8_t hop,
                        uint8_t path_len, uint32_t value,
                        uint8_t *buf, size_t cap, size_t *len_out);

/** Append: data (the store's entry_len bytes) to list `list_id`. */
int dta_encode_append(const dta_header *h, uint32_t list_id, const uint8_t *data,
                      size_t data_len, uint8_t *buf, size_t cap, size_t *len_out);

/** Sketch-Merge: column `column` of sketch `sketch_id` in `epoch`, from reporter
 *  h->reporter_id. Count-Min: `rows` big-endian uint32 counters; HyperLogLog:
 *  registers_per_column bytes. To an in-order store each reporter sends its columns in order,
 *  0 first; to a store with sync = "approsync", any column at any time, with its current
 *  (cumulative) values. */
int dta_encode_sketch_column(const dta_header *h, uint16_t sketch_id, uint16_t column,
                             uint32_t epoch, const uint8_t *data, size_t data_len,
                             uint8_t *buf, size_t cap, size_t *len_out);

/** The header of native report datagram buf[0..len) (immediate is set to 0): the reporter id
 *  and sequence number identify the report, e.g. for a receiver logging what arrived.
 *  DTA_E_INVALID, naming the parser's reason, if buf is not a native report datagram. */
int dta_datagram_header(const uint8_t *buf, size_t len, dta_header *out);

/** The column of row `row` a Count-Min sketch of `columns` columns (power of two <= 65536)
 *  counts `key` in: the hash the Sketch-Merge store's query reads with. */
int dta_sketch_cm_column(const uint8_t *key, size_t key_len, uint32_t row, uint32_t columns,
                         uint32_t *column);

/* ------------------------------------------------------------------------ */
/* A reporter's ApproSync sketch (for a store of sync = "approsync")         */
/* ------------------------------------------------------------------------ */

/** A Count-Min sketch with DTA's hash that a reporter keeps and syncs column by column with
 *  ApproSync ([InvisiFlow §6.1]): a column is due when one of its counters has grown by `theta`
 *  times the value last sent (and by at least 1). Not thread-safe; one per sketch. */
typedef struct dta_approsync dta_approsync;

/** A zeroed rows x columns sketch (rows 1..=16, columns a power of two <= 65536: the store's
 *  shape) for sketch `sketch_id`, epoch `epoch`, threshold theta (finite, >= 0). */
int dta_approsync_new(uint32_t rows, uint32_t columns, double theta, uint16_t sketch_id,
                      uint32_t epoch, dta_approsync **out);

/** Count `inc` for key in every row; *newly_due (may be NULL) is 1 when a column became due. */
int dta_approsync_update(dta_approsync *s, const uint8_t *key, size_t key_len,
                         uint32_t inc, int *newly_due);

/** Columns due for a sync. */
int dta_approsync_due(dta_approsync *s, size_t *due);

/** Take the next due column: its index, its rows x 4 wire bytes (big-endian u32, cumulative)
 *  into data[0..cap) for dta_encode_sketch_column; it then counts as sent. DTA_E_EMPTY when
 *  none is due; DTA_E_NO_SPACE (still due) when cap < rows x 4. Send what it returns until
 *  DTA_E_EMPTY. */
int dta_approsync_next_due(dta_approsync *s, uint16_t *column, uint8_t *data, size_t cap,
                           size_t *len_out);

/** Make every column due: a full resync (heals every loss so far; `columns` reports). */
int dta_approsync_mark_all_due(dta_approsync *s);

/** The local sketch's estimate of key (what the store answers once every due column arrived). */
int dta_approsync_estimate(dta_approsync *s, const uint8_t *key, size_t key_len,
                           uint64_t *estimate);

/** Start epoch `epoch` from an empty sketch. */
int dta_approsync_next_epoch(dta_approsync *s, uint32_t epoch);

/** Free a sketch (NULL is ignored). */
void dta_approsync_free(dta_approsync *s);

/* ------------------------------------------------------------------------ */
/* Queries (as `dta query`); dta_collector_flush first to see every report    */
/* ------------------------------------------------------------------------ */

/** Key-Write: the value of `key` (plurality vote over the store's N copies, at least
 *  `threshold` agreeing) into data_out[0..cap), its length into *data_len.
 *  DTA_E_EMPTY / DTA_E_AMBIGUOUS when there is no answer. */
int dta_query_key_write(dta_collector *c, const char *store, const uint8_t *key, size_t key_len,
                        uint8_t threshold, uint8_t *data_out, size_t cap, size_t *data_len);

/** Key-Increment: key's count-min estimate (never below the true count); of a store kept in
 *  time windows, in its current window. */
int dta_query_key_increment(dta_collector *c, const char *store, const uint8_t *key,
                            size_t key_len, uint64_t *count);

/** Key-Increment over the time windows `window` selects: "current", "all", "last:5m" (ms, s,
 *  m, h or d: the unit is required) or "at:UNIX_MS"; NULL for the store's default (the current window; a cumulative
 *  store's one table). The sum of each window's count into *count, the windows covered into
 *  *windows (0 for a cumulative store). DTA_E_INVALID, with the reason, for a window the store
 *  cannot answer (a cumulative store takes only "all"); DTA_E_PARTIAL, with *count and *windows
 *  written, for a "last:" longer than the store keeps (the answer covers what it holds). */
int dta_query_key_increment_window(dta_collector *c, const char *store, const uint8_t *key,
                                   size_t key_len, const char *window, uint64_t *count,
                                   uint32_t *windows);

/** Postcarding: flow key's per-hop values, hop 0 first, into path_out[0..cap), the hop count
 *  into *hops. DTA_E_EMPTY / DTA_E_AMBIGUOUS when there is no answer. */
int dta_query_postcard_path(dta_collector *c, const char *store, const uint8_t *key,
                            size_t key_len, uint32_t *path_out, size_t cap, size_t *hops);

/** Start an Append read at the oldest entry still held. */
#define DTA_TAIL_OLDEST UINT64_MAX

typedef struct dta_list_read {
    size_t entries;     /* entries written to the buffer, oldest first, back to back */
    size_t entry_len;   /* bytes per entry */
    uint64_t next_tail; /* pass back as `tail` to continue */
    uint64_t missed;    /* entries overwritten before they could be read */
} dta_list_read;

/** Append: entries of list `list` from absolute index `tail` (or DTA_TAIL_OLDEST), as many as
 *  buf[0..cap) holds. */
int dta_query_append_read(dta_collector *c, const char *store, uint32_t list, uint64_t tail,
                          uint8_t *buf, size_t cap, dta_list_read *out);

/** Sketch-Merge Count-Min: key's merged estimate. DTA_E_NOT_MERGED while a column it reads
 *  has not been merged. */
int dta_query_sketch(dta_collector *c, const char *store, const uint8_t *key, size_t key_len,
                     uint64_t *estimate);

/** Sketch-Merge HyperLogLog: the estimated number of distinct keys. */
int dta_query_sketch_cardinality(dta_collector *c, const char *store, double *cardinality);

#ifdef __cplusplus
}
#endif

#endif /* DTA_DTA_H */
