#!/usr/bin/env python3
"""Read dta's Kafka topics knowing nothing but the shipped schema files.

Every record's value is decoded by its headers (`dta.schema` names the message of dta.proto,
`dta.format` says json or protobuf; without them the topic's suffix decides the message and
--format the encoding). A protobuf value is decoded with code generated from dta.proto at start
(grpcio-tools' protoc), then turned into the JSON form; a JSON value is read as it is. Either way
the record is validated against its JSON Schema (schemas/json/) and printed as one JSON line:
{"topic", "partition", "offset", "key", "schema", "format", "record"}.

    pip install kafka-python lz4 zstandard protobuf grpcio-tools jsonschema
    python3 consume.py --brokers 127.0.0.1:9092 --topic dta.flows [--schemas /usr/share/dta/schemas]

Exit status 1 if a record does not decode or does not match its schema (after printing the rest).
"""
import argparse
import importlib
import json
import pathlib
import sys
import tempfile

import jsonschema
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError
from grpc_tools import protoc
from kafka import KafkaConsumer, TopicPartition

# The message of each topic (docs/kafka.md), by the topic's last dot-separated part.
TOPICS = {"append": "AppendEntry", "events": "IntEvent", "flows": "FlowRecord",
          "snapshots": "KeySnapshot"}
SCHEMA_FILES = {"AppendEntry": "append-entry", "IntEvent": "int-event",
                "FlowRecord": "flow-record", "KeySnapshot": "key-snapshot"}


def default_schemas():
    here = pathlib.Path(__file__).resolve().parent.parent
    return here if (here / "dta.proto").exists() else pathlib.Path("/usr/share/dta/schemas")


def load_proto(schemas, workdir):
    """The Python module protoc generates from dta.proto."""
    rc = protoc.main(["protoc", f"-I{schemas}", f"--python_out={workdir}", "dta.proto"])
    if rc != 0:
        sys.exit(f"protoc could not compile {schemas / 'dta.proto'}")
    sys.path.insert(0, str(workdir))
    return importlib.import_module("dta_pb2")


def read_varint(b):
    """A length-delimited message's length and where the message starts."""
    n, shift = 0, 0
    for i, byte in enumerate(b[:10]):
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, i + 1
        shift += 7
    raise ValueError("bad length prefix")


def to_json(msg):
    """The JSON form of a decoded message (schemas/json/): every field, except optional fields
    not set and oneof members not chosen; bytes as hex; 64-bit integers as numbers."""
    out = {}
    for f in msg.DESCRIPTOR.fields:
        if f.has_presence and not msg.HasField(f.name):
            continue
        v = getattr(msg, f.name)
        conv = (to_json if f.type == FieldDescriptor.TYPE_MESSAGE
                else (lambda b: b.hex()) if f.type == FieldDescriptor.TYPE_BYTES
                else (lambda x: x))
        repeated = getattr(f, "is_repeated", None)
        repeated = repeated if repeated is not None else f.label == FieldDescriptor.LABEL_REPEATED
        out[f.name] = [conv(x) for x in v] if repeated else conv(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", required=True, help="HOST:PORT[,HOST:PORT...]")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--schemas", type=pathlib.Path, default=default_schemas(),
                    help="directory with dta.proto and json/ (default: the shipped one)")
    ap.add_argument("--format", choices=["json", "protobuf"], default="json",
                    help="encoding of records without a dta.format header")
    ap.add_argument("--timeout-ms", type=int, default=10000)
    a = ap.parse_args()

    validators = {}
    for name, file in SCHEMA_FILES.items():
        schema = json.loads((a.schemas / "json" / f"{file}.schema.json").read_text())
        validators[name] = jsonschema.Draft202012Validator(schema)

    consumer = KafkaConsumer(bootstrap_servers=a.brokers.split(","), enable_auto_commit=False,
                             consumer_timeout_ms=a.timeout_ms)
    parts = [TopicPartition(a.topic, p) for p in sorted(consumer.partitions_for_topic(a.topic)
                                                       or [])]
    if not parts:
        sys.exit(f"topic {a.topic} does not exist")
    consumer.assign(parts)
    consumer.seek_to_beginning()
    end = consumer.end_offsets(parts)
    bad = 0
    with tempfile.TemporaryDirectory() as work:
        pb = load_proto(a.schemas, work)
        for r in consumer:
            headers = {k: v.decode(errors="replace") for k, v in (r.headers or [])}
            fmt = headers.get("dta.format", a.format)
            try:
                name = headers.get("dta.schema") or "dta.v1." + TOPICS[a.topic.rsplit(".", 1)[-1]]
                name = name.rsplit(".", 1)[-1]
                if fmt == "protobuf":
                    n, start = read_varint(r.value)
                    if start + n != len(r.value):
                        raise ValueError(f"length prefix {n} for {len(r.value) - start} bytes")
                    record = to_json(getattr(pb, name).FromString(r.value[start:]))
                else:
                    record = json.loads(r.value)
                validators[name].validate(record)
            except (ValueError, KeyError, AttributeError, DecodeError,
                    jsonschema.ValidationError) as e:
                bad += 1
                print(f"{a.topic}/{r.partition}@{r.offset}: {e}", file=sys.stderr)
            else:
                key = r.key.decode() if r.key and r.key.isascii() and r.key.decode().isprintable() \
                    else (r.key.hex() if r.key else None)
                print(json.dumps({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                                  "key": key, "schema": f"dta.v1.{name}", "format": fmt,
                                  "record": record}))
            if all(consumer.position(p) >= end[p] for p in parts):
                break
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
