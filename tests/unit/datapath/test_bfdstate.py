# -*- coding: utf-8 -*-
"""Unit tests of the watcher's BFD input (pure logic): FRR bfdd control-socket framing, the notify
messages of bfdd 8.x (as captured from /usr/lib/frr/bfdd 8.4.4 here), the per-NIC rule and its path
through the detector's hold-down and dampening."""
import json
import struct

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bfdstate as B
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health as HL
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import bfd as vbfd

NICS = [{"name": "eth%d" % k, "index": k, "gw4": "198.18.%d.1" % k, "gw6": "fd00:1:%d::1" % k} for k in range(4)]
S1, S2 = "/run/netscale-vipinjector-bfd/slot1/bfdd.sock", "/run/netscale-vipinjector-bfd/slot2/bfdd.sock"


def frame(body, mtype=B.BMT_NOTIFY, msg_id=0):
    raw = json.dumps(body).encode()
    return struct.pack("!IHBB", len(raw), msg_id, mtype, 1) + raw


def status(k, state, slot=1, multihop=False):
    """A peer-status notification as bfdd 8.4 sends it (single hop: with local-interface)."""
    b = {"op": "status", "ipv6": True, "multihop": multihop, "peer-address": "fd00:1:%d:0::1" % k,
         "local-address": "fd00:1:%d::1%d" % (k, slot), "id": 1234, "remote-id": 1234, "state": state,
         "diagnostics": 0, "remote-diagnostics": 0}
    if not multihop:
        b["local-interface"] = "eth%d" % k
    return b


def test_notify_request_matches_bfdctl_h():
    m = B.notify_request()
    length, msg_id, mtype, ver = struct.unpack("!IHBB", m[:8])
    assert (length, mtype, ver) == (8, 4, 1) and msg_id != 0   # id 0 is bfdd's notification id
    assert struct.unpack("=Q", m[8:])[0] == 1                  # BCM_NOTIFY_PEER_STATE, host order (memcpy)


def test_decoder_splits_partial_and_joined_frames():
    d = B.Decoder()
    stream = frame({"status": "ok"}, B.BMT_RESPONSE, 1) + frame(status(1, "up")) + frame(status(2, "down"))
    got = []
    for i in range(0, len(stream), 7):        # arbitrary read boundaries
        got += d.feed(stream[i:i + 7])
    assert [(t, i) for t, i, dummy in got] == [(1, 1), (4, 0), (4, 0)]
    assert got[0][2] == {"status": "ok"} and got[2][2]["state"] == "down"
    assert d.buf == b""
    # a NUL-terminated or non-object payload does not break the stream
    assert d.feed(struct.pack("!IHBB", 3, 0, 4, 1) + b"[]\0") == [(4, 0, {})]


def test_decoder_rejects_what_bfdd_cannot_send():
    with pytest.raises(ValueError):
        B.Decoder().feed(struct.pack("!IHBB", 2, 0, 4, 2) + b"{}")
    with pytest.raises(ValueError):
        B.Decoder().feed(struct.pack("!IHBB", B.MAX_PAYLOAD + 1, 0, 4, 1))


def test_session_state_parses_single_and_multihop_and_ignores_others():
    key, peer, state, label = B.session_state(status(1, "up"))
    assert peer == "fd00:1:1::1" and state == "up" and "dev eth1" in label      # address normalised
    assert B.session_state(status(1, "up", multihop=True))[0] != key           # another session
    assert B.session_state({"status": "ok"}) is None
    assert B.session_state({"op": "add", "peer-address": "fd00::1", "state": "up"}) is None
    assert B.session_state({"op": "status", "peer-address": "not-an-address", "state": "up"}) is None


def test_nic_goes_down_only_when_every_session_that_was_up_is_down():
    t = B.Tracker(NICS)
    assert t.update(S1, status(1, "up")) == [] and t.update(S2, status(1, "up", slot=2)) == []
    assert t.update(S1, status(1, "down")) == []                  # slot 2's session still up
    tr = t.update(S2, status(1, "down", slot=2))
    assert [(n, w) for n, w, dummy in tr] == [("eth1", "down")]
    assert tr[0][2].startswith("bfd: all 2 sessions down") and "slot1" in tr[0][2] and "slot2" in tr[0][2]
    assert t.update(S2, status(1, "init", slot=2)) == []          # init is not up
    assert [(n, w) for n, w, dummy in t.update(S1, status(1, "up"))] == [("eth1", "up")]
    assert t.down == set()
    assert t.summary()["eth1"] == (1, 2, 2)


def test_session_that_never_came_up_never_takes_a_nic_out():
    t = B.Tracker(NICS)
    assert t.update(S1, status(2, "down")) == [] and t.update(S1, status(2, "init")) == []
    assert t.update(S1, status(2, "down")) == [] and t.down == set()
    # other NICs' sessions do not count for eth2; sessions to foreign peers are ignored
    t.update(S1, status(3, "up"))
    assert t.update(S1, dict(status(3, "down"), **{"peer-address": "fd00:9::1"})) == []
    assert t.down == set()


def test_admin_down_stops_counting_and_lost_socket_is_not_a_failure():
    t = B.Tracker(NICS)
    t.update(S1, status(0, "up"))
    assert t.update(S1, status(0, "adm-down")) == []              # shut on purpose: not a failure
    t.update(S1, status(0, "up"))
    assert [w for dummy, w, dummy2 in t.update(S1, status(0, "down"))] == ["down"]
    # the responder restarts: its sessions are forgotten, the NIC is no longer BFD-down
    assert [(n, w) for n, w, dummy in t.lost(S1)] == [("eth0", "up")]
    assert t.lost(S1) == [] and t.summary()["eth0"] == (0, 0, 0)
    # after the reconnect the dump shows the new sessions down/init: they do not count until up
    assert t.update(S1, status(0, "down")) == [] and t.update(S1, status(0, "init")) == []
    assert t.update(S1, status(0, "up")) == [] and t.down == set()


def test_ipv4_sessions_map_by_gateway():
    t = B.Tracker(NICS)
    b = {"op": "status", "multihop": True, "peer-address": "198.18.2.1", "local-address": "198.18.2.11", "state": "up"}
    t.update(S1, b)
    assert [(n, w) for n, w, dummy in t.update(S1, dict(b, state="down"))] == [("eth2", "down")]


def test_socket_glob_matches_the_vipinjector_units():
    paths = vbfd.instance_paths(vbfd.merge_options({}), 3)
    assert HL.DEFAULTS["bfd_dir"] == vbfd.DEFAULTS["runtime_dir"]
    assert paths["bfdctl"] == "%s/slot3/bfdd.sock" % HL.DEFAULTS["bfd_dir"]
    import fnmatch
    assert fnmatch.fnmatch(paths["bfdctl"], HL.DEFAULTS["bfd_dir"] + "/" + B.SOCKET_GLOB)
    with open("roles/vipinjector/templates/netscale-vipinjector-bfd@.service.j2") as f:
        assert "--bfdctl %t/netscale-vipinjector-bfd/slot%i/bfdd.sock" in f.read()


# ---- through the detector: same hold-down / dampening path as the other signals -----------------
def test_bfd_down_holds_the_nic_out_although_the_gateway_answers():
    d = HL.Detector([n["name"] for n in NICS], now=0.0)
    for t10 in range(0, 20):
        for n in NICS:
            d.reply(n["name"], t10 / 10.0)
        d.tick(t10 / 10.0)
    assert d.block("eth1", 2.0, "bfd", "bfd: session down") == [("eth1", "out", "bfd: session down")]
    assert d.block("eth1", 2.0, "bfd", "again") == []
    # ARP keeps answering for 5 s: the NIC stays out
    t = 2.0
    while t < 7.0:
        for n in NICS:
            d.reply(n["name"], t)
        assert d.tick(t) == []
        t += 0.1
    assert d.out() == {"eth1"}
    # BFD up again: back after the hold-down (1 s), not before
    d.unblock("eth1", 7.0, "bfd")
    back = None
    t = 7.0
    while t < 9.0 and back is None:
        for n in NICS:
            d.reply(n["name"], t)
        if d.tick(t):
            back = t
        t += 0.1
    assert back is not None and 7.95 <= back <= 8.15, back
    assert d.out() == set()


def test_bfd_unblock_with_a_silent_gateway_stays_out():
    d = HL.Detector(["eth0", "eth1"], now=0.0)
    d.block("eth1", 0.1, "bfd", "bfd: session down")
    d.reply("eth0", 5.0)
    assert d.unblock("eth1", 5.0, "bfd") == []          # eth1's gateway silent for 5 s
    d.reply("eth0", 7.0)
    assert d.tick(7.0) == [] and d.out() == {"eth1"}
    d.reply("eth1", 7.1)                                # the gateway answers again: hold-down from here
    d.reply("eth0", 7.5)
    d.reply("eth1", 7.5)
    assert d.tick(7.5) == []
    d.reply("eth0", 8.2)
    d.reply("eth1", 8.2)
    assert [(n, w) for n, w, dummy in d.tick(8.2)] == [("eth1", "in")]


def test_bfd_flaps_are_dampened_like_other_flaps():
    d = HL.Detector(["eth0", "eth1"], now=0.0)
    t, outs = 0.0, 0
    for dummy in range(5):                                # 5 BFD flaps in 2.5 s
        outs += len(d.block("eth1", t, "bfd", "bfd: down"))
        d.reply("eth1", t + 0.25)
        d.unblock("eth1", t + 0.25, "bfd")
        d.reply("eth0", t + 0.25)
        d.tick(t + 0.25)
        t += 0.5
    assert outs == 1                                      # out once, never back in between
    assert d.nics["eth1"].suppressed
    for step in range(1, 80):                             # answering, BFD up: back once the penalty decays
        t2 = t + step * 0.1
        d.reply("eth0", t2)
        d.reply("eth1", t2)
        if d.tick(t2):
            break
    assert d.out() == set() and t2 - t > 1.0


def test_check_params_bfd_options():
    p = HL.check_params({"bfd": False, "bfd_dir": "/run/x/"})
    assert p["bfd"] is False and p["bfd_dir"] == "/run/x"
    assert HL.check_params(None)["bfd"] is True
    with pytest.raises(ValueError, match=r"host_datapath_detection\.bfd: 'yes' is not a boolean"):
        HL.check_params({"bfd": "yes"})
    with pytest.raises(ValueError, match=r"bfd_dir: 'run/x' is not an absolute path.*Fix"):
        HL.check_params({"bfd_dir": "run/x"})


# ---- the watcher's socket side against a fake bfdd control socket ----------------------------------
class _FakeGray(object):
    def __init__(self):
        self.cfg = {"nics": NICS}
        self.changes = []

    def bfd(self, changes):
        self.changes += changes


def _serve_once(srv, messages, hold):
    """Accept one client, check its subscription, send ``messages``, keep it open until ``hold`` is set."""
    conn, dummy = srv.accept()
    head = conn.recv(8)
    length, dummy2, mtype, ver = struct.unpack("!IHBB", head)
    payload = conn.recv(length)
    assert (mtype, ver, struct.unpack("=Q", payload)[0]) == (4, 1, 1)
    conn.sendall(frame({"status": "ok"}, B.BMT_RESPONSE, 1) + b"".join(frame(m) for m in messages))
    hold.wait(5)
    conn.close()


def test_watcher_subscribes_follows_and_reconnects(tmp_path, monkeypatch):
    import socket
    import threading
    import time
    from ansible_collections.netscale.multinic.plugins.module_utils.datapath import watcher as W
    logs = []
    monkeypatch.setattr(W, "log", logs.append)
    (tmp_path / "slot1").mkdir()
    path = str(tmp_path / "slot1" / "bfdd.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    gray = _FakeGray()
    ev = W.BfdEvents(gray, str(tmp_path))
    ev.RESCAN = 0.05
    first, second = threading.Event(), threading.Event()
    server = threading.Thread(target=lambda: (_serve_once(srv, [status(1, "up"), status(1, "down")], first),
                                              _serve_once(srv, [status(1, "init")], second)), daemon=True)
    server.start()
    ev.start()

    def wait_for(cond):
        deadline = time.monotonic() + 5
        while not cond() and time.monotonic() < deadline:
            time.sleep(0.01)
        return cond()
    assert wait_for(lambda: len(gray.changes) == 1), (gray.changes, logs)
    assert gray.changes[0][:2] == ("eth1", "down") and "bfd" in gray.changes[0][2]
    first.set()      # the responder goes away: not a failure, the NIC is released, then reconnected
    assert wait_for(lambda: len(gray.changes) == 2 and sum("subscribed" in x for x in logs) == 2), (gray.changes, logs)
    assert gray.changes[1][:2] == ("eth1", "up")
    assert any("lost %s" % path in x and "reconnecting" in x for x in logs), logs
    time.sleep(0.2)  # the new session's "init" (never up since the reconnect) takes nothing out
    assert len(gray.changes) == 2
    ev.stopped.set()
    second.set()
    server.join(5)
    ev.join(5)
    srv.close()
    assert not ev.is_alive()
