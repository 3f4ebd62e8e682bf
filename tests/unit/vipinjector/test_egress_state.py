# -*- coding: utf-8 -*-
"""The helper follows the host NIC watcher's egress set (issue 12: the ToR stops sending on a NIC the
host found dead): the watcher publishes it, the helper withdraws on that NIC's session only, puts the
route back when the NIC returns, and ignores a stale, malformed or missing state."""
import io
import json
import os
import time

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import guard, render, sidecar

NONE = {"type": "none"}


def _helper(host, state_file, **egress):
    opts = {"health": NONE, "path_check": NONE, "egress_state": dict({"file": str(state_file)}, **egress)}
    cfg = json.loads(render.render_instance(host, 1, opts)["files"]["helper.json"])
    out = io.StringIO()
    return sidecar.Helper(cfg, out=out, inp=io.StringIO(""), log=open(os.devnull, "w")), out


def test_rendered_default_points_at_the_watchers_file(host):
    cfg = json.loads(render.render_instance(host, 1, {"health": NONE})["files"]["helper.json"])
    assert cfg["egress_state"] == {"file": health.EGRESS_STATE_FILE, "poll": 0.05, "stale_after": 5.0}


def test_watcher_publishes_indexes_and_names(tmp_path, egress):
    p = tmp_path / "run" / "egress-state.json"
    egress.publish(p, {"eth1"}, {"eth0": 0, "eth1": 1, "eth2": 2}, 1000.0)
    data = json.loads(p.read_text())
    assert data == {"version": 1, "out": [1], "out_nics": ["eth1"], "updated": 1000.0}
    assert oct(os.stat(str(p)).st_mode & 0o777) == "0o644"
    assert [x.name for x in p.parent.iterdir()] == ["egress-state.json"]   # no temp file left


def test_out_nic_is_withdrawn_on_its_session_only_and_back_when_it_returns(host, tmp_path, egress):
    p = tmp_path / "egress-state.json"
    h, dummy = _helper(host, p)
    egress.healthy(h)
    first = h.core.reconcile()
    assert len(first) == 2 * len(h.alloc.sessions)       # /32 and /128 on every session
    nic = egress.by_nic(h)
    egress.publish(p, {"eth1"}, dict(("eth%d" % k, k) for k in nic), 1000.0)
    assert h.read_egress(now=1000.5) is True
    cmds = h.core.reconcile()
    assert sorted(c.split()[1] for c in cmds) == [str(nic[1])] * 2
    assert all(" withdraw route " in c for c in cmds)
    st = h.core.status()
    assert st["egress_out"] == [1]
    assert [s["reason"] for s in st["sessions"] if s["nic"] == 1] == ["NIC out of the host's egress set"]
    assert all(s["announced"] for s in st["sessions"] if s["nic"] != 1)
    # unchanged file: nothing new
    assert h.read_egress(now=1001.0) is False and h.core.reconcile() == []
    # the NIC is back in the egress set
    egress.publish(p, set(), dict(("eth%d" % k, k) for k in nic), 1002.0)
    assert h.read_egress(now=1002.1) is True
    back = h.core.reconcile()
    assert sorted(c.split()[1] for c in back) == [str(nic[1])] * 2 and all(" announce route " in c for c in back)


def test_stale_state_counts_as_nothing_out(host, tmp_path, egress):
    """A watcher that stopped rewriting (dead, hung) must not keep a NIC withdrawn."""
    p = tmp_path / "egress-state.json"
    h, dummy = _helper(host, p, stale_after=5.0)
    egress.healthy(h)
    h.core.reconcile()
    egress.publish(p, {"eth2"}, {"eth0": 0, "eth1": 1, "eth2": 2, "eth3": 3}, 1000.0)
    assert h.read_egress(now=1004.0) is True and h.core.nic_out == {2}
    h.core.reconcile()
    assert h.read_egress(now=1005.5) is True and h.core.nic_out == set()   # same file, now too old
    assert all(" announce route " in c for c in h.core.reconcile())


@pytest.mark.parametrize("text", ["{", "[]", '{"out": ["x"], "updated": 1}', '{"out": [1]}'])
def test_malformed_or_missing_state_counts_as_nothing_out(host, tmp_path, text):
    p = tmp_path / "egress-state.json"
    h, dummy = _helper(host, p)
    assert h.read_egress(now=10.0) is False and h.core.nic_out == set()   # no file
    p.write_text(text)
    h.read_egress(now=10.0)
    assert h.core.nic_out == set()


def test_egress_out_is_pure():
    assert guard.egress_out(None, 5.0, 5.0) == (set(), "no egress state")
    assert guard.egress_out({"out": [1, 3], "updated": 1.0}, 2.0, 5.0) == ({1, 3}, "egress state ok")
    assert guard.egress_out({"out": [], "updated": 1.0}, 100.0, 5.0) == (set(), "egress state ok")
    assert guard.egress_out({"out": [1], "updated": 1.0}, 7.0, 5.0)[0] == set()


def test_off_when_file_is_null(host):
    cfg = json.loads(render.render_instance(host, 1, {"health": NONE, "egress_state": {"file": None}})
                     ["files"]["helper.json"])
    h = sidecar.Helper(cfg, out=io.StringIO(), inp=io.StringIO(""), log=open(os.devnull, "w"))
    assert h.egress_file is None and h.read_egress() is False


@pytest.mark.parametrize("value, field", [
    ({"file": "relative/path"}, "egress_state.file"),
    ({"poll": 0}, "egress_state.poll"),
    ({"stale_after": 1.0}, "egress_state.stale_after"),
    ({"poll": True}, "egress_state.poll"),
    ({"bogus": 1}, "egress_state"),
])
def test_bad_options_name_field_value_fix(host, value, field):
    with pytest.raises(render.RenderError) as e:
        render.render_instance(host, 1, {"health": NONE, "egress_state": value})
    assert str(e.value).startswith(field + ":") and "Fix:" in str(e.value)


def test_helper_loop_polls_the_state(host, tmp_path, egress):
    """The poll is wired into run(): one short run with a NIC out leaves that session withdrawn."""
    p = tmp_path / "egress-state.json"
    h, out = _helper(host, p)
    egress.publish(p, {"eth0"}, {"eth0": 0, "eth1": 1, "eth2": 2, "eth3": 3}, time.time())
    h.cfg["status_file"] = str(tmp_path / "status.json")
    h.cfg["guard_config"] = False
    h.cfg["require_local_task_ip"] = False
    h.wd_enabled = False
    lines = ["neighbor %s up" % peer for peer in h.alloc.sessions]

    class Inp(object):
        def __iter__(self):
            for ln in lines:
                yield ln + "\n"
            time.sleep(0.5)   # long enough for health rise (none: immediate) and a few polls
    h.inp = Inp()
    h.run()
    nic0 = egress.by_nic(h)[0]
    sent = out.getvalue().splitlines()
    assert not any(c.startswith("neighbor %s announce" % nic0) for c in sent)
    assert any(c.startswith("neighbor %s announce" % egress.by_nic(h)[1]) for c in sent)


def test_exabgp_launcher_turns_nagle_off_on_outgoing_sessions(monkeypatch):
    """`vipinjector-helper exabgp ...` (the unit's ExecStart) runs ExaBGP with TCP_NODELAY on the sessions it
    opens: otherwise the second of two back-to-back UPDATEs (IPv4 then IPv6 withdraw) waits for the ACK of
    the first, which never comes under ToR -> host loss."""
    import socket
    outgoing = pytest.importorskip("exabgp.reactor.network.outgoing")
    app = pytest.importorskip("exabgp.application.main")
    from exabgp.protocol.family import AFI
    monkeypatch.setattr(outgoing.Outgoing, "_setup", outgoing.Outgoing._setup)   # restored after the test
    seen = []
    monkeypatch.setattr(app, "main", lambda: seen.append(list(__import__("sys").argv)) or 0)
    monkeypatch.setattr("sys.argv", ["vipinjector-helper"])
    plain = outgoing.Outgoing(AFI.ipv6, "fd00:1::1", None)
    assert plain._setup() is None
    assert plain.io.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0   # ExaBGP's own default
    plain.io.close()
    plain.io = None
    assert sidecar.main(["exabgp", "server", "/x/exabgp.conf"]) == 0
    assert seen == [["exabgp", "server", "/x/exabgp.conf"]]
    conn = outgoing.Outgoing(AFI.ipv6, "fd00:1::1", None)
    assert conn._setup() is None
    assert conn.io.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    conn.io.close()
    conn.io = None


def test_exabgp_launcher_runs_exabgp_unchanged_without_the_hook(monkeypatch, capsys):
    """An ExaBGP without ``Outgoing._setup`` (another release) still starts, and the log says Nagle stays on."""
    outgoing = pytest.importorskip("exabgp.reactor.network.outgoing")
    app = pytest.importorskip("exabgp.application.main")
    monkeypatch.delattr(outgoing.Outgoing, "_setup")
    ran = []
    monkeypatch.setattr(app, "main", lambda: ran.append(True) or 0)
    monkeypatch.setattr("sys.argv", ["vipinjector-helper"])
    assert sidecar.main(["exabgp", "server", "/x/exabgp.conf"]) == 0
    assert ran == [True]
    assert "cannot turn Nagle's algorithm off" in capsys.readouterr().err
