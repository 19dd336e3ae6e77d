"""The shipped JSON Schemas are what scripts/schemas.py writes from schemas/dta.proto, so the two
contracts of the Kafka records cannot drift apart; and they reject what a record must not be."""
import json
import pathlib
import subprocess
import sys

import jsonschema
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_json_schemas_are_generated_from_the_proto():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "schemas.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def validator(name):
    schema = json.loads((ROOT / "schemas" / "json" / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


EVENT = {"seq": 1, "time_ns": 2, "kind": "hop_latency", "src_addr": "10.0.0.1",
         "dst_addr": "10.0.0.2", "src_port": 1, "dst_port": 2, "protocol": 6, "hop": 0,
         "node_id": 100, "value": 9000}


def test_an_event_validates_and_a_broken_one_does_not():
    v = validator("int-event")
    v.validate(EVENT)
    for broken in ({**EVENT, "extra": 1}, {k: x for k, x in EVENT.items() if k != "seq"},
                   {**EVENT, "hop": -1}, {**EVENT, "value": 2**32}):
        with pytest.raises(jsonschema.ValidationError):
            v.validate(broken)


def test_an_append_entry_has_at_most_one_decoding_and_hex_bytes():
    v = validator("append-entry")
    entry = {"store": "events", "list": 0, "index": 3, "record": "int-event", "raw": "00ff"}
    v.validate(entry)
    v.validate({**entry, "event": EVENT})
    summary = {"seq": 3, "last_ns": 1, "src_addr": "a", "dst_addr": "b", "src_port": 1,
               "dst_port": 2, "protocol": 6, "hops": 5, "packets": 2, "path_latency_ns": 7}
    with pytest.raises(jsonschema.ValidationError):
        v.validate({**entry, "event": EVENT, "flow_summary": summary})
    with pytest.raises(jsonschema.ValidationError):
        v.validate({**entry, "raw": "0g"})
