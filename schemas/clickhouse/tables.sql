-- ClickHouse tables and views for dta's Kafka records (docs/clickhouse.md). Run once:
--   clickhouse-client --multiquery < tables.sql
-- then kafka.sql to feed the tables from the topics. Every column is a field of schemas/dta.proto
-- (same name), so the Kafka engine's Protobuf format fills them by name; `time` is derived.
-- Records arrive at least once: the views count each record once by its identity (the key of
-- each table's LIMIT 1 BY below).

CREATE DATABASE IF NOT EXISTS dta;

-- dta.v1.FlowRecord: a flow leaving the INT sink's FlowCache. Identity: 5-tuple and first_ns.
CREATE TABLE IF NOT EXISTS dta.flow_records
(
    src_addr String,
    dst_addr String,
    src_port UInt16,
    dst_port UInt16,
    protocol UInt8,
    packets UInt64,
    first_ns UInt64,
    last_ns UInt64,
    reason LowCardinality(String),
    path_latency_ns UInt64,
    hops Nested(
        node_id Nullable(UInt32),
        hop_latency Nullable(UInt32),
        avg_hop_latency Nullable(Float64),
        queue_occupancy Nullable(UInt32),
        avg_queue_occupancy Nullable(Float64),
        egress_tx_util Nullable(UInt32),
        avg_egress_tx_util Nullable(Float64),
        path_changes UInt32),
    time DateTime64(9) MATERIALIZED fromUnixTimestamp64Nano(toInt64(last_ns))
)
ENGINE = MergeTree
PARTITION BY toDate(time)
ORDER BY (time, src_addr, dst_addr, src_port, dst_port, protocol)
TTL toDateTime(time) + INTERVAL 30 DAY;

-- dta.v1.IntEvent: threshold, change and drop events. Identity: seq (per INT sink).
CREATE TABLE IF NOT EXISTS dta.int_events
(
    seq UInt64,
    time_ns UInt64,
    kind LowCardinality(String),
    src_addr String,
    dst_addr String,
    src_port UInt16,
    dst_port UInt16,
    protocol UInt8,
    hop UInt8,
    node_id UInt32,
    value UInt32,
    time DateTime64(9) MATERIALIZED fromUnixTimestamp64Nano(toInt64(time_ns))
)
ENGINE = MergeTree
PARTITION BY toDate(time)
ORDER BY (time, kind, node_id)
TTL toDateTime(time) + INTERVAL 30 DAY;

-- dta.v1.AppendEntry: every entry of the exported Append lists, its bytes as written.
-- Identity: (store, list, index). Decoded `int-event` entries are in event / flow_summary of the
-- record (read them from the topic, or the INT sink's own topics above).
CREATE TABLE IF NOT EXISTS dta.append_entries
(
    store LowCardinality(String),
    list UInt32,
    `index` UInt64,
    record LowCardinality(String),
    raw String,
    exported DateTime64(3) DEFAULT now64(3)
)
ENGINE = MergeTree
ORDER BY (store, list, `index`)
TTL toDateTime(exported) + INTERVAL 30 DAY;

-- Each flow record once (at-least-once delivery may bring one twice): the views below read this.
CREATE VIEW IF NOT EXISTS dta.flow_records_once AS
SELECT time, src_addr, dst_addr, src_port, dst_port, protocol, packets, path_latency_ns, hops
FROM dta.flow_records
LIMIT 1 BY src_addr, dst_addr, src_port, dst_port, protocol, first_ns;

-- The ten flows of highest path latency (the sum of their hops' average latencies) in each
-- minute, by the minute of their last packet.
CREATE VIEW IF NOT EXISTS dta.top_flows_by_latency_per_minute AS
SELECT
    toStartOfMinute(time) AS minute,
    src_addr, dst_addr, src_port, dst_port, protocol,
    path_latency_ns,
    packets
FROM dta.flow_records_once
ORDER BY minute, path_latency_ns DESC, src_addr, dst_addr, src_port, dst_port, protocol
LIMIT 10 BY minute;

-- Each switch's hop latency over each hour: the packets it carried and their mean latency (both
-- exact: every packet's latency is in its flow's average), and the distribution of the flows'
-- average latencies at it in 1 µs buckets, weighted by packets.
CREATE VIEW IF NOT EXISTS dta.switch_latency_per_hour AS
SELECT
    toStartOfHour(time) AS hour,
    assumeNotNull(hop.node_id) AS node_id,
    sum(flow_packets) AS packets,
    sum(assumeNotNull(hop.avg_hop_latency) * flow_packets) / sum(flow_packets) AS mean_latency_ns
FROM (SELECT time, packets AS flow_packets, hops FROM dta.flow_records_once)
ARRAY JOIN hops AS hop
WHERE hop.node_id IS NOT NULL AND hop.avg_hop_latency IS NOT NULL
GROUP BY hour, node_id
ORDER BY hour, node_id;

CREATE VIEW IF NOT EXISTS dta.switch_latency_histogram_per_hour AS
SELECT
    toStartOfHour(time) AS hour,
    assumeNotNull(hop.node_id) AS node_id,
    intDiv(toUInt64(assumeNotNull(hop.avg_hop_latency)), 1000) * 1000 AS bucket_ns,
    sum(flow_packets) AS packets
FROM (SELECT time, packets AS flow_packets, hops FROM dta.flow_records_once)
ARRAY JOIN hops AS hop
WHERE hop.node_id IS NOT NULL AND hop.avg_hop_latency IS NOT NULL
GROUP BY hour, node_id, bucket_ns
ORDER BY hour, node_id, bucket_ns;

-- Events per minute, kind and switch.
CREATE VIEW IF NOT EXISTS dta.events_per_minute AS
SELECT toStartOfMinute(time) AS minute, kind, node_id, count() AS events
FROM (SELECT time, kind, node_id FROM dta.int_events LIMIT 1 BY seq)
GROUP BY minute, kind, node_id
ORDER BY minute, kind, node_id;
