"""spec/vectors/independent/ is exactly what spec/tools/independent_vectors.py produces (so the
committed vectors cannot drift from the generator), the generator uses nothing of this
repository, and scapy reads the frames around the INT vectors (Ethernet / IPv4 / UDP) to the
same fields and finds their IPv4 header checksums valid.

Run: .venv/bin/python -m pytest spec/tests
"""

import ast
import importlib.util
import json
import pathlib
import sys

import pytest
from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

SPEC = pathlib.Path(__file__).resolve().parents[1]
TOOL = SPEC / "tools" / "independent_vectors.py"
OUT = SPEC / "vectors" / "independent"


def _generator():
    spec = importlib.util.spec_from_file_location("independent_vectors", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()
INT = json.loads((OUT / "int.json").read_text())


@pytest.mark.parametrize("name", sorted(GEN.outputs()))
def test_committed_output_is_the_generators(name):
    assert (OUT / name).read_text() == GEN.outputs()[name], (
        f"regenerate: python3 spec/tools/independent_vectors.py ({name} differs)"
    )


def test_check_mode_agrees():
    assert GEN.main(["--check"]) == 0


def test_generator_imports_only_the_standard_library():
    tree = ast.parse(TOOL.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    assert names <= set(sys.stdlib_module_names), names - set(sys.stdlib_module_names)


def _packets():
    """(name, packet bytes, True when it starts with Ethernet else IPv4, expected INT JSON) of
    every packet carrying INT: the frame vectors and the reports' inner packets."""
    for v in INT["vectors"]:
        if v["kind"] == "frame":
            yield v["name"], bytes.fromhex(v["hex"]), True, v["expect"]
            continue
        if "reports" not in v["expect"]:
            # Telemetry Report v0.5/v1.0: one inner Ethernet frame after a fixed header.
            yield v["name"], bytes.fromhex(v["expect"]["inner"]), True, v["expect"]["inner_int"]
            continue
        for i, r in enumerate(v["expect"]["reports"]):
            name = f"{v['name']}[{i}]"
            if r["in_type"] == 1:  # TLVs: the IPv4 packet TLVs
                for t in r["tlvs"]:
                    if t["type"] == 2:
                        yield name, bytes.fromhex(t["data"]), False, r["inner_int"]
            else:
                yield name, bytes.fromhex(r["inner"]), r["in_type"] == 3, r["inner_int"]


PACKETS = list(_packets())


@pytest.mark.parametrize("name,packet,ethernet,expect", PACKETS, ids=[p[0] for p in PACKETS])
def test_scapy_reads_the_packet(name, packet, ethernet, expect):
    if ethernet:
        eth = Ether(packet)
        assert eth.type == 0x0800
        ip = eth[IP]
        packet = packet[14:]
    else:
        ip = IP(packet)
    udp = ip[UDP]
    assert (ip.src, ip.dst, ip.proto) == (expect["flow"]["src"], expect["flow"]["dst"], 17)
    # A truncated packet in a report is padded to whole words after the IPv4 packet.
    assert ip.len <= len(packet) < ip.len + 4
    assert udp.len == ip.len - 20
    assert udp.sport == expect["flow"]["src_port"]
    v1 = expect.get("header", {}).get("version") == 1
    if v1:
        # INT v1.0 is found by DSCP; the packet keeps its flow's destination port.
        value, mask = INT["detect"]["dscp"]
        assert (ip.tos >> 2) & mask == value
        assert udp.dport == expect["flow"]["dst_port"]
    else:
        assert udp.dport == INT["detect"]["udp_port"]
    # scapy recomputes the IPv4 header checksum when it is cleared: it must be ours.
    rebuilt = ip.copy()
    del rebuilt.chksum
    assert IP(raw(rebuilt)).chksum == ip.chksum
    # The INT shim starts the UDP payload; its Length counts the words after it.
    payload = raw(udp.payload)
    stack = 4 * expect["header"]["hop_ml"] * expect["hop_count"] if "hops" in expect else 0
    if v1:
        # v1.0 shim: Type, reserved, Length (words, the shim included: one more than the
        # words after it, which the JSON gives as for v2), reserved; an 8-byte metadata header.
        assert payload[0] == expect["shim"]["type"]
        assert payload[2] == expect["shim"]["length"] + 1
        assert payload[2] * 4 == 4 + 8 + stack
    else:
        assert payload[0] >> 4 == expect["shim"]["type"]
        assert payload[1] == expect["shim"]["length"]
        assert payload[1] * 4 == 12 + stack


def test_every_report_is_a_whole_number_of_words():
    for v in INT["vectors"]:
        if v["kind"] != "report" or "reports" not in v["expect"]:
            continue  # v0.5/v1.0 reports have no report_length words
        raw_report = bytes.fromhex(v["hex"])
        lengths = sum(4 + 4 * r["report_length"] for r in v["expect"]["reports"])
        assert len(raw_report) == 8 + lengths, v["name"]
