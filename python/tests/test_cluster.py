"""The cluster map from Python: the rendezvous hash against spec/vectors/cluster.json (the
vectors the Rust crate and the C header check), map validation, and ClusterReporter sending
each report to its owner's translator (UDP sockets of this test stand in for translators)."""

import socket

import pytest

import dta
from conftest import REPO, load_vectors

VECTORS = load_vectors("cluster.json")


def test_seeds_scores_owners_match_the_vectors():
    for s in VECTORS["seeds"]:
        assert dta.cluster_seed(s["name"]) == int(s["seed"], 16)
    for c in VECTORS["cases"]:
        key = bytes.fromhex(c["key"])
        names = c["collectors"]
        assert names[dta.cluster_owner(names, key)] == c["owner"]
        assert ["%016x" % dta.cluster_score(key, dta.cluster_seed(n)) for n in names] == \
            c["scores"]


def test_example_map_and_refusals():
    m = dta.ClusterMap.load(str(REPO / "examples" / "cluster.toml"))
    assert m.version == 1
    assert [c["name"] for c in m.collectors] == ["c0", "c1", "c2"]
    assert m.list_owner("events", 7) == "c1"
    assert m.list_owner("events", 99) == "c2"
    assert m.store_for("key_write", 13) == "flows"
    assert m.store_for("sketch_merge", 2, 2) == "distinct"
    assert m.sketch_owner("distinct", 2) == "c1"
    want = {c["key"]: c["owner"] for c in VECTORS["cases"]
            if c["collectors"] == ["c0", "c1", "c2"]}
    for k, o in want.items():
        assert m.owner("kw", bytes.fromhex(k)) == o
    with pytest.raises(ValueError, match="named twice"):
        dta.ClusterMap.parse('version = 1\n[[collector]]\nname = "a"\ntranslator = '
                             '"127.0.0.1:1"\nmode = "shm"\n[[collector]]\nname = "a"\n'
                             'translator = "127.0.0.1:2"\nmode = "shm"\n')
    with pytest.raises(ValueError, match="no collector"):
        dta.ClusterMap.parse("version = 1\n")
    with pytest.raises(ValueError, match="no store"):
        m.owner("nope", b"\0\0\0\1")


def test_cluster_reporter_sends_each_key_to_its_owner():
    socks = []
    for _ in range(3):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.settimeout(2.0)
        socks.append(s)
    text = "version = 1\n"
    for i, s in enumerate(socks):
        text += (f'[[collector]]\nname = "c{i}"\ntranslator = "127.0.0.1:{s.getsockname()[1]}"\n'
                 'mode = "shm"\n')
    text += ('[[store]]\nname = "kw"\nkind = "key-write"\n'
             '[[store]]\nname = "ev"\nkind = "append"\ntable = { c1 = [5] }\ncollector = "c2"\n')
    m = dta.ClusterMap.parse(text)
    keys = [k.to_bytes(4, "big") for k in range(60)]
    with dta.cluster.ClusterReporter(m, reporter_id=3, nack_port=None) as r:
        for k in keys:
            r.key_write(k, b"\1\2\3\4")
            r.flush()
        r.append(5, b"abcd")
        r.append(6, b"efgh")
        r.flush()
        counts = dict(r.per_collector)
    got = {i: [] for i in range(3)}
    for i, s in enumerate(socks):
        s.setblocking(False)
        while True:
            try:
                d = s.recv(65536)
            except BlockingIOError:
                break
            for rep in dta.decode(d)["reports"]:
                got[i].append(rep)
        s.close()
    for i in range(3):
        kws = [bytes.fromhex(x["key"]) for x in got[i] if x["opcode"] == "key_write"]
        assert all(m.owner("kw", k) == f"c{i}" for k in kws)
        assert len(kws) + sum(1 for x in got[i] if x["opcode"] == "append") == \
            counts[f"c{i}"]
    assert sum(len(v) for v in got.values()) == 62
    assert [x["list_id"] for x in got[1] if x["opcode"] == "append"] == [5]
    assert [x["list_id"] for x in got[2] if x["opcode"] == "append"] == [6]
