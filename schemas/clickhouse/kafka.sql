-- Feed tables.sql's tables from dta's topics with ClickHouse's Kafka engine (docs/clickhouse.md).
-- Assumes the topics' prefix `dta`, records written with `--format protobuf` (length-delimited, as
-- ClickHouse's `Protobuf` format reads them), and dta.proto in the server's format_schema_path
-- (/var/lib/clickhouse/format_schemas/ by default; the package installs it as
-- /usr/share/dta/schemas/dta.proto). Change kafka_broker_list to your brokers.

CREATE TABLE IF NOT EXISTS dta.flow_records_queue
(
    src_addr String, dst_addr String, src_port UInt16, dst_port UInt16, protocol UInt8,
    packets UInt64, first_ns UInt64, last_ns UInt64, reason String, path_latency_ns UInt64,
    hops Nested(
        node_id Nullable(UInt32), hop_latency Nullable(UInt32), avg_hop_latency Nullable(Float64),
        queue_occupancy Nullable(UInt32), avg_queue_occupancy Nullable(Float64),
        egress_tx_util Nullable(UInt32), avg_egress_tx_util Nullable(Float64),
        path_changes UInt32)
)
ENGINE = Kafka
SETTINGS kafka_broker_list = '127.0.0.1:9092', kafka_topic_list = 'dta.flows',
    kafka_group_name = 'clickhouse-dta-flows', kafka_format = 'Protobuf',
    kafka_schema = 'dta.proto:FlowRecord';

CREATE MATERIALIZED VIEW IF NOT EXISTS dta.flow_records_mv TO dta.flow_records AS
SELECT * FROM dta.flow_records_queue;

CREATE TABLE IF NOT EXISTS dta.int_events_queue
(
    seq UInt64, time_ns UInt64, kind String, src_addr String, dst_addr String,
    src_port UInt16, dst_port UInt16, protocol UInt8, hop UInt8, node_id UInt32, value UInt32
)
ENGINE = Kafka
SETTINGS kafka_broker_list = '127.0.0.1:9092', kafka_topic_list = 'dta.events',
    kafka_group_name = 'clickhouse-dta-events', kafka_format = 'Protobuf',
    kafka_schema = 'dta.proto:IntEvent';

CREATE MATERIALIZED VIEW IF NOT EXISTS dta.int_events_mv TO dta.int_events AS
SELECT * FROM dta.int_events_queue;

CREATE TABLE IF NOT EXISTS dta.append_entries_queue
(
    store String, list UInt32, `index` UInt64, record String, raw String
)
ENGINE = Kafka
SETTINGS kafka_broker_list = '127.0.0.1:9092', kafka_topic_list = 'dta.append',
    kafka_group_name = 'clickhouse-dta-append', kafka_format = 'Protobuf',
    kafka_schema = 'dta.proto:AppendEntry';

CREATE MATERIALIZED VIEW IF NOT EXISTS dta.append_entries_mv TO dta.append_entries AS
SELECT store, list, `index`, record, raw FROM dta.append_entries_queue;
