#!/usr/bin/env python3
"""Load dta's Kafka topics into an embedded ClickHouse (chDB) with the shipped DDL, and query it.

For trying the ClickHouse pipeline without a server: a ClickHouse server reads the topics itself
with schemas/clickhouse/kafka.sql. This reads every record of the topics PREFIX.flows,
PREFIX.events and PREFIX.append (kafka-python), runs schemas/clickhouse/tables.sql in a chDB
session at --db, and inserts each topic's values into its table as the Kafka engine would: the
values of `protobuf` records through ClickHouse's `Protobuf` format with dta.proto, `json`
records through `JSONEachRow`. Then it prints each --query's rows as JSON lines (a view of
tables.sql by name, or any SELECT).

    pip install chdb kafka-python lz4 zstandard
    python3 clickhouse.py --brokers 127.0.0.1:9092 --db ./ch \
        --query top_flows_by_latency_per_minute --query switch_latency_per_hour
"""
import argparse
import json
import pathlib
import sys
import tempfile

from chdb import session
from kafka import KafkaConsumer, TopicPartition

SCHEMAS = pathlib.Path(__file__).resolve().parent.parent
# topic suffix -> (table, message of dta.proto)
TABLES = {"flows": ("flow_records", "FlowRecord"), "events": ("int_events", "IntEvent"),
          "append": ("append_entries", "AppendEntry")}


def read_topic(brokers, topic, timeout_ms):
    """Every record's (value, format) of `topic`, oldest first per partition."""
    c = KafkaConsumer(bootstrap_servers=brokers, enable_auto_commit=False,
                      consumer_timeout_ms=timeout_ms)
    parts = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
    if not parts:
        return []
    c.assign(parts)
    c.seek_to_beginning()
    end = c.end_offsets(parts)
    out = []
    if all(end[p] == 0 for p in parts):
        return out
    for r in c:
        fmt = dict(r.headers or []).get("dta.format", b"json").decode()
        out.append((r.value, fmt))
        if all(c.position(p) >= end[p] for p in parts):
            break
    c.close()
    return out


def statements(sql):
    """The statements of a .sql file (no semicolons inside them)."""
    body = "\n".join(l for l in sql.splitlines() if not l.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def quote(text):
    """A ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--prefix", default="dta")
    ap.add_argument("--db", required=True, type=pathlib.Path, help="chDB session directory")
    ap.add_argument("--schemas", type=pathlib.Path, default=SCHEMAS)
    ap.add_argument("--query", action="append", default=[],
                    help="a view of tables.sql (e.g. top_flows_by_latency_per_minute) or a SELECT")
    ap.add_argument("--timeout-ms", type=int, default=10000)
    a = ap.parse_args()

    s = session.Session(str(a.db))
    for stmt in statements((a.schemas / "clickhouse" / "tables.sql").read_text()):
        s.query(stmt)
    proto = a.schemas / "dta.proto"
    loaded = {}
    with tempfile.TemporaryDirectory() as work:
        for suffix, (table, message) in TABLES.items():
            records = read_topic(a.brokers.split(","), f"{a.prefix}.{suffix}", a.timeout_ms)
            loaded[table] = len(records)
            for fmt in ("protobuf", "json"):
                values = [v for v, f in records if f == fmt]
                if not values:
                    continue
                path = pathlib.Path(work) / f"{table}.{fmt}"
                if fmt == "protobuf":
                    # Length-delimited values, one after the other: the Protobuf format's input.
                    path.write_bytes(b"".join(values))
                    cols = s.query(f"SELECT arrayStringConcat(groupArray(name), ', ') FROM "
                                   f"system.columns WHERE database = 'dta' AND table = '{table}' "
                                   f"AND default_kind = ''", "TabSeparatedRaw").bytes().decode().strip()
                    s.query(f"INSERT INTO dta.{table} ({cols}) SELECT {cols} FROM "
                            f"file('{path}', 'Protobuf') SETTINGS "
                            f"format_schema = '{proto}:{message}'")
                else:
                    path.write_bytes(b"\n".join(values) + b"\n")
                    s.query(f"INSERT INTO dta.{table} SELECT * FROM file('{path}', 'JSONEachRow') "
                            f"SETTINGS input_format_import_nested_json = 1, "
                            f"input_format_skip_unknown_fields = 1")
    print(json.dumps({"loaded": loaded}), file=sys.stderr)
    # kafka.sql needs a server's Kafka engine (chDB cannot run one): each statement is parsed.
    for stmt in statements((a.schemas / "clickhouse" / "kafka.sql").read_text()):
        s.query("SELECT formatQuery({q:String})".replace("{q:String}", quote(stmt)))
    for q in a.query:
        sql = q if " " in q.strip() else f"SELECT * FROM dta.{q}"
        out = s.query(sql, "JSONEachRow").bytes().decode()
        for line in out.splitlines():
            row = json.loads(line)
            print(json.dumps({"query": q, **row}))


if __name__ == "__main__":
    main()
