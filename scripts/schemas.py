#!/usr/bin/env python3
"""Write the JSON Schemas of the Kafka records (schemas/json/*.schema.json) from schemas/dta.proto.

The .proto is the contract; the JSON form has the same field names: every field present, except
proto3 `optional` fields (absent when unset) and the members of a oneof (only the one set); 64-bit
integers as JSON numbers; `bytes` as lowercase hex. `--check` exits 1 if a file is not what this
script writes (the tests run it so). Needs grpcio-tools (scripts/requirements-dev.txt).
"""
import argparse
import json
import pathlib
import sys
import tempfile

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = ROOT / "schemas" / "dta.proto"
OUT = ROOT / "schemas" / "json"
# The topics' messages, and the file each one's schema is written to.
TOPICS = {
    "AppendEntry": "append-entry",
    "IntEvent": "int-event",
    "FlowRecord": "flow-record",
    "KeySnapshot": "key-snapshot",
}
F = descriptor_pb2.FieldDescriptorProto
RANGES = {
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
}


def descriptor():
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / "dta.pb"
        rc = protoc.main(["protoc", f"-I{PROTO.parent}", f"--descriptor_set_out={out}",
                          "--include_source_info", PROTO.name])
        if rc != 0:
            sys.exit(f"protoc failed on {PROTO}")
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return fds.file[0]


def comments(f):
    """Leading comments by (message index, field index or None)."""
    out = {}
    for loc in f.source_code_info.location:
        p = list(loc.path)
        text = " ".join(line.strip() for line in loc.leading_comments.strip().splitlines())
        if not text:
            continue
        if len(p) == 2 and p[0] == 4:
            out[(p[1], None)] = text
        elif len(p) == 4 and p[0] == 4 and p[2] == 2:
            out[(p[1], p[3])] = text
    return out


def field_schema(field, package):
    if field.type == F.TYPE_MESSAGE:
        s = {"$ref": "#/$defs/" + field.type_name.removeprefix(f".{package}.")}
    elif field.type in RANGES:
        lo, hi = RANGES[field.type]
        s = {"type": "integer", "minimum": lo, "maximum": hi}
    elif field.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        s = {"type": "number"}
    elif field.type == F.TYPE_BOOL:
        s = {"type": "boolean"}
    elif field.type == F.TYPE_STRING:
        s = {"type": "string"}
    elif field.type == F.TYPE_BYTES:
        s = {"type": "string", "pattern": "^([0-9a-f]{2})*$", "contentEncoding": "base16"}
    else:
        sys.exit(f"{field.name}: no JSON form for protobuf type {field.type}")
    if field.label == F.LABEL_REPEATED:
        s = {"type": "array", "items": s}
    return s


def message_schema(i, m, package, notes):
    props, required, oneofs = {}, [], {}
    for j, field in enumerate(m.field):
        s = field_schema(field, package)
        if (i, j) in notes:
            s = {"description": notes[(i, j)], **s}
        props[field.name] = s
        synthetic = field.proto3_optional
        if field.HasField("oneof_index") and not synthetic:
            oneofs.setdefault(m.oneof_decl[field.oneof_index].name, []).append(field.name)
        elif not synthetic:
            required.append(field.name)
    s = {"type": "object"}
    if (i, None) in notes:
        s["description"] = notes[(i, None)]
    s |= {"properties": props, "required": required, "additionalProperties": False}
    # At most one member of each oneof.
    exclusive = [{"not": {"required": [a, b]}}
                 for members in oneofs.values()
                 for k, a in enumerate(members) for b in members[k + 1:]]
    if exclusive:
        s["allOf"] = exclusive
    return s


def schemas():
    f = descriptor()
    notes = comments(f)
    defs = {m.name: message_schema(i, m, f.package, notes) for i, m in enumerate(f.message_type)}

    def used(name, seen):
        if name in seen:
            return
        seen.add(name)
        for p in defs[name]["properties"].values():
            ref = p.get("$ref") or p.get("items", {}).get("$ref")
            if ref:
                used(ref.rsplit("/", 1)[1], seen)

    out = {}
    for name, file in TOPICS.items():
        seen = set()
        used(name, seen)
        seen.discard(name)
        s = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:dta:{f.package}:{file}",
            "title": f"{f.package}.{name}",
            **defs[name],
        }
        if seen:
            s["$defs"] = {n: defs[n] for n in sorted(seen)}
        out[OUT / f"{file}.schema.json"] = json.dumps(s, indent=2) + "\n"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    a = ap.parse_args()
    stale = []
    for path, text in schemas().items():
        if a.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        sys.exit("out of date (run scripts/schemas.py): " + ", ".join(map(str, stale)))


if __name__ == "__main__":
    main()
