# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's admin-drain marker: its format, the NIC watcher's egress set and the sidecar's withdraws."""

from __future__ import annotations

import json

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health as HL
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import watcher
from ansible_collections.netscale.multinic.plugins.module_utils import drain_marker as MK
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import sidecar

NAMES = ["eth0", "eth1", "eth2", "eth3"]


def test_desired_adds_keeps_metadata_and_removes_the_file_when_empty():
    d1 = MK.desired(None, "nic", "drained", nic=1, meta={"since": 1.0, "reason": "a"})
    assert d1 == {"version": 1, "nics": {"1": {"since": 1.0, "reason": "a"}}, "host": None}
    d2 = MK.desired(d1, "nic", "drained", nic=1, meta={"since": 2.0})
    assert d2 == d1   # idempotent: the first drain's metadata stays
    d3 = MK.desired(d2, "host", "drained", meta={"since": 3.0})
    assert d3["host"] == {"since": 3.0} and d3["nics"] == d1["nics"]
    assert MK.desired(MK.desired(d3, "host", "undrained"), "nic", "undrained", nic=1) is None
    assert MK.parse(d3) == ({1}, True, "admin drain ok")
    assert MK.parse(None) == (set(), False, "no admin drain")
    assert MK.parse({"version": 2}) == (set(), False, "admin drain marker malformed: ignored")
    assert MK.parse({"version": 1, "nics": {"x": {}}})[2] == "admin drain marker malformed: ignored"


def test_effective_out_keeps_drained_out_and_never_all():
    assert HL.effective_out(set(), NAMES, {"eth1"}) == {"eth1"}
    assert HL.effective_out({"eth2"}, NAMES, {"eth1"}) == {"eth1", "eth2"}
    # every NIC that is not drained dead: they stay in (as without detection), the drain holds
    assert HL.effective_out({"eth0", "eth2", "eth3"}, NAMES, {"eth1"}) == {"eth1"}
    # a marker covering every NIC is ignored
    assert HL.effective_out({"eth0"}, NAMES, set(NAMES)) == {"eth0"}
    # without a drain: unchanged behaviour
    assert HL.effective_out({"eth0", "eth1"}, ["eth0", "eth1"]) == set()


def _health(tmp_path, ebpf=True):
    rt = tmp_path / "runtime.json"
    nics = [{"name": n, "index": i, "table": 1100 + i, "gw4": "198.18.0.%d" % (16 * i + 1)} for i, n in enumerate(NAMES)]
    rt.write_text(json.dumps({"devices": {}, "detect": {"ebpf": ebpf, "metric_own": 10, "metric_fallback": 20,
                                                        "nics": nics, "params": {}}}))
    return watcher.Health(str(rt), str(tmp_path / "admin-drain.json"))


def test_watcher_reads_the_marker_at_start_and_on_change(tmp_path):
    (tmp_path / "admin-drain.json").write_text(MK.text(MK.desired(None, "nic", "drained", nic=2)))
    h = _health(tmp_path)
    assert h.admin == {"eth2"} and h.effective() == {"eth2"}    # before the first write of the egress set
    (tmp_path / "admin-drain.json").write_text(MK.text(MK.desired(None, "nic", "drained", nic=3)))
    assert h.read_admin() and h.admin == {"eth3"}
    assert not h.read_admin()
    (tmp_path / "admin-drain.json").unlink()
    assert h.read_admin() and h.admin == set()
    (tmp_path / "admin-drain.json").write_text("{not json")
    assert not h.read_admin() and h.admin == set()


def test_watcher_publishes_drained_and_kernel_mode_skips_the_drained_own_route(tmp_path):
    (tmp_path / "admin-drain.json").write_text(MK.text(MK.desired(None, "nic", "drained", nic=1)))
    h = _health(tmp_path, ebpf=False)
    h.STATE_FILE = str(tmp_path / "egress-state.json")
    h.publish(h.effective())
    st = json.loads((tmp_path / "egress-state.json").read_text())
    assert st["out"] == [1] and st["drained"] == [1] and st["out_nics"] == ["eth1"]
    assert h.skip_lines() == {"route replace default table 1101 metric 10 via 198.18.0.17 dev eth1"}


def _helper(tmp_path, host):
    from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render
    opts = {"health": {"type": "none"}, "path_check": {"type": "none"}, "admin_drain": {"file": str(tmp_path / "m.json")}}
    cfg = json.loads(render.render_instance(host, 1, opts)["files"]["helper.json"])
    h = sidecar.Helper(cfg, out=open("/dev/null", "w"), log=open("/dev/null", "w"))
    h.core.health.feed(True, "ok")
    h.core.health.feed(True, "ok")
    for peer in h.alloc.sessions:
        h.core.session_event(peer, "up")
    return h


def test_sidecar_withdraws_on_the_drained_nic_then_everything_for_a_host_drain(tmp_path, host):
    h = _helper(tmp_path, host)
    by_nic = dict((int(s["nic"]), peer) for peer, s in h.alloc.sessions.items())
    h.core.reconcile()
    assert all(h.core.announced[p] for p in by_nic.values())
    (tmp_path / "m.json").write_text(MK.text(MK.desired(None, "nic", "drained", nic=1)))
    assert h.read_admin()
    cmds = h.core.reconcile()
    assert cmds and all(c.startswith("neighbor %s withdraw" % by_nic[1]) for c in cmds)
    assert h.core.status()["admin_drain"] == {"host": False, "nics": [1]}
    assert h.core.reason(by_nic[1]) == "NIC admin-drained" and h.core.reason(by_nic[0]) == "healthy"
    (tmp_path / "m.json").write_text(MK.text(MK.desired(MK.desired(None, "nic", "drained", nic=1), "host", "drained")))
    assert h.read_admin()
    h.core.reconcile()
    assert not any(h.core.announced.values())
    (tmp_path / "m.json").unlink()
    assert h.read_admin()
    h.core.reconcile()
    assert all(h.core.announced[p] for p in by_nic.values())


def test_sidecar_marker_off_with_null(tmp_path, host):
    from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render
    cfg = json.loads(render.render_instance(host, 1, {"health": {"type": "none"}, "admin_drain": {"file": None}}
                                            )["files"]["helper.json"])
    assert cfg["admin_drain"] == {"file": None}
    dflt = json.loads(render.render_instance(host, 1, {"health": {"type": "none"}})["files"]["helper.json"])
    assert dflt["admin_drain"] == {"file": MK.ADMIN_DRAIN_FILE}
