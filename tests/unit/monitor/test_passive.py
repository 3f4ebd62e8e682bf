"""Passive signals: NIC counters from sysfs, the watcher's egress set, sidecar sessions, and the events
between two snapshots."""
import json
import os
import socket
import threading

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bfdstate
from ansible_collections.netscale.multinic.plugins.module_utils.monitor import passive


def _nic(root, name, **vals):
    base = root / name
    (base / "statistics").mkdir(parents=True)
    for key, value in vals.items():
        rel = passive.NIC_FILES.get(key, key)
        (base / rel).write_text("%d\n" % value)


def test_read_nic_counters(tmp_path):
    _nic(tmp_path, "eth0", carrier=1, carrier_changes=2, rx_errors=0, tx_errors=1, rx_dropped=5, tx_dropped=0)
    (tmp_path / "eth1" / "statistics").mkdir(parents=True)
    (tmp_path / "eth1" / "carrier").write_text("garbage")
    got = passive.read_nic_counters(["eth0", "eth1", "eth9"], str(tmp_path))
    assert got["eth0"] == {"present": True, "carrier": 1, "carrier_changes": 2, "rx_errors": 0, "tx_errors": 1,
                           "rx_dropped": 5, "tx_dropped": 0}
    assert got["eth1"]["present"] and got["eth1"]["carrier"] is None and got["eth1"]["rx_errors"] is None
    assert got["eth9"] == {"present": False}


def test_read_egress_fresh_and_stale(tmp_path):
    path = tmp_path / "egress.json"
    assert passive.read_egress(str(path), 100.0) == {"present": False, "fresh": False, "out": []}
    path.write_text(json.dumps({"out_nics": ["eth1"], "updated": 99.0}))
    assert passive.read_egress(str(path), 100.0)["out"] == ["eth1"]
    # a watcher that stopped rewriting it: its out set no longer counts
    assert passive.read_egress(str(path), 200.0) == {"present": True, "fresh": False, "out": []}
    path.write_text("{not json")
    assert passive.read_egress(str(path), 100.0)["present"] is False


def test_read_sidecars(tmp_path):
    for slot, states in ((1, ["up", "up"]), (2, ["up", "connect"])):
        d = tmp_path / ("slot%d" % slot)
        d.mkdir()
        (d / "status.json").write_text(json.dumps({"sessions": [{"nic": "eth%d" % i, "state": st}
                                                                for i, st in enumerate(states)]}))
    (tmp_path / "slot3").mkdir()
    (tmp_path / "slot3" / "status.json").write_text("{")
    got = passive.read_sidecars(str(tmp_path))
    assert got == {(1, "eth0"): "up", (1, "eth1"): "up", (2, "eth0"): "up", (2, "eth1"): "connect"}
    assert passive.sessions_per_nic(got, ["eth0", "eth1"]) == {"eth0": (2, 2), "eth1": (1, 2)}
    # the sidecars name NICs by their plan index: mapped to the interface names
    (tmp_path / "slot4").mkdir()
    (tmp_path / "slot4" / "status.json").write_text(json.dumps({"sessions": [{"nic": 1, "state": "up"}]}))
    got = passive.read_sidecars(str(tmp_path), [{"index": 0, "name": "eth0"}, {"index": 1, "name": "eth1"}])
    assert got[(4, "eth1")] == "up"


def _bfdd(path, bodies, answer=True):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def run():
        conn, dummy = srv.accept()
        conn.recv(1024)
        if answer:
            msgs = [(bfdstate.BMT_RESPONSE, {"status": "ok"})] + [(bfdstate.BMT_NOTIFY, b) for b in bodies]
            for mtype, body in msgs:
                raw = json.dumps(body).encode()
                conn.sendall(bfdstate.struct.pack(bfdstate.HEADER, len(raw), 1, mtype, 1) + raw)
        threading.Event().wait(1.0)   # keeps the socket open like bfdd: the reader's deadline ends it
        conn.close()
        srv.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_read_bfd_maps_peers_to_nics_within_a_deadline(tmp_path):
    d = tmp_path / "slot1"
    d.mkdir()
    _bfdd(str(d / "bfdd.sock"), [{"op": "status", "peer-address": "fd00:10::1", "state": "up"},
                                 {"op": "status", "peer-address": "fd00:11::1", "state": "down"},
                                 {"op": "status", "peer-address": "fd00:99::1", "state": "up"}])
    nics = [{"name": "eth0", "gateway": "fd00:10::1"}, {"name": "eth1", "gateway": "fd00:11::1"}]
    got = passive.read_bfd(nics, str(tmp_path), deadline=0.3)
    assert got == {(1, "eth0"): "up", (1, "eth1"): "down"}


def test_bfd_socket_that_never_answers_is_bounded(tmp_path):
    import time
    d = tmp_path / "slot1"
    d.mkdir()
    _bfdd(str(d / "bfdd.sock"), [], answer=False)
    t0 = time.monotonic()
    assert passive.read_bfd([{"name": "eth0", "gateway": "fd00:10::1"}], str(tmp_path), deadline=0.2) == {}
    assert time.monotonic() - t0 < 0.9


def _snap(**kw):
    base = {"nics": {"eth0": {"present": True, "carrier": 1, "carrier_changes": 2, "rx_errors": 0, "tx_errors": 0,
                              "rx_dropped": 0, "tx_dropped": 0}},
            "egress": {"out": []}, "bgp": {(1, "eth0"): "up"}, "bfd": {(1, "eth0"): "up"}, "spoof": {1: 0}}
    base.update(kw)
    return base


def test_changes_between_snapshots():
    old = _snap()
    assert passive.changes(None, old) == []
    assert passive.changes(old, _snap()) == []
    new = _snap(nics={"eth0": {"present": True, "carrier": 0, "carrier_changes": 4, "rx_errors": 3, "tx_errors": 0,
                               "rx_dropped": 1, "tx_dropped": 1}},
                egress={"out": ["eth0"]}, bgp={(1, "eth0"): "connect"}, bfd={(1, "eth0"): "down"}, spoof={1: 7})
    kinds = [(k, nic, slot, v) for k, nic, slot, v, dummy in passive.changes(old, new)]
    assert kinds == [("nic_carrier_change", "eth0", None, 2), ("nic_errors", "eth0", None, 3),
                     ("nic_drops", "eth0", None, 2), ("egress_out", "eth0", None, None),
                     ("bgp_session_down", "eth0", 1, None), ("bfd_session_down", "eth0", 1, None),
                     ("spoofed_packets", None, 1, 7)]
    back = passive.changes(new, _snap(nics=new["nics"], spoof={1: 7}))
    assert [(k, nic) for k, nic, s, v, d in back] == [
        ("egress_in", "eth0"), ("bgp_session_up", "eth0"), ("bfd_session_up", "eth0")]


def test_counter_reset_and_missing_nic():
    old = _snap()
    reset = _snap(nics={"eth0": dict(old["nics"]["eth0"], carrier_changes=1)})
    assert [x[3] for x in passive.changes(old, reset)] == [1]
    gone = _snap(nics={"eth0": {"present": False}})
    assert [x[0] for x in passive.changes(old, gone)] == ["nic_missing"]


def test_read_spoof_without_datapath(tmp_path):
    assert passive.read_spoof(str(tmp_path)) == {}
    (tmp_path / "datapath.json").write_text(json.dumps({"spec": {"ebpf": False}}))
    os.environ.setdefault("PATH", "/usr/bin")
    assert isinstance(passive.read_spoof(str(tmp_path), timeout=2.0), dict)
