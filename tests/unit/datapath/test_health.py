# -*- coding: utf-8 -*-
"""Unit tests of the gray-failure detection (pure logic): liveness, hold-down, dampening, and what the
watcher writes (mn_nics NIC_OUT bits, kernel-mode table routes), plus the probe frames it parses."""
import socket
import struct

import pytest

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import bpf, desired, health as HL
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import spec as datapath_spec
from ansible_collections.netscale.multinic.plugins.module_utils.datapath import watcher as W

NICS = ("eth0", "eth1", "eth2", "eth3")


def alive(d, t, nics=NICS):
    for n in nics:
        d.reply(n, t)


def run(d, t0, t1, answering, step=0.1):
    """Probe rounds from t0 to t1: the NICs in ``answering`` reply every round. Returns transitions."""
    out = []
    t = t0
    while t <= t1 + 1e-9:
        alive(d, t, answering)
        out += [(round(t, 2), n, what) for n, what, dummy in d.tick(t)]
        t += step
    return out


def test_silent_gateway_is_out_within_bound_and_back_after_hold_down():
    d = HL.Detector(NICS, now=0.0)
    tr = run(d, 0.0, 2.0, NICS)
    assert tr == [] and d.out() == set()
    # eth1's gateway goes silent at 2.05: out at the first tick after 300 ms without a reply
    tr = run(d, 2.1, 3.0, ["eth0", "eth2", "eth3"])
    assert [x[1:] for x in tr] == [("eth1", "out")]
    assert 2.3 < tr[0][0] <= 2.5          # detection bound 0.5 s (last reply at 2.0)
    assert d.out() == {"eth1"}
    # heals at 3.1: back in only after hold_down (1 s) of continuous replies
    tr = run(d, 3.1, 5.0, NICS)
    assert [x[1:] for x in tr] == [("eth1", "in")]
    assert 4.1 <= tr[0][0] <= 4.25
    assert d.out() == set()


def test_immediate_down_and_neighbour_failed():
    d = HL.Detector(NICS, now=0.0)
    assert d.down("eth2", 0.5, "link down") == [("eth2", "out", "link down")]
    assert d.down("eth2", 0.6, "again") == []          # already dead: no second transition, no penalty
    assert d.down("nope", 0.6, "x") == []
    assert d.out() == {"eth2"}


def test_flap_storm_is_suppressed_then_returns_bounded():
    d = HL.Detector(NICS, now=0.0)
    run(d, 0.0, 1.0, NICS)
    transitions = []
    t = 1.0
    for dummy in range(10):                        # 10 flaps in 5 s: down 0.25 s, up 0.25 s
        transitions += [(n, w) for n, w, r in d.down("eth1", t, "link down")]
        transitions += [(x[1], x[2]) for x in run(d, t, t + 0.2, ["eth0", "eth2", "eth3"])]
        transitions += [(x[1], x[2]) for x in run(d, t + 0.25, t + 0.45, NICS)]
        t += 0.5
    # one transition out, never back in during the storm: no churn
    assert transitions == [("eth1", "out")]
    assert d.nics["eth1"].suppressed
    assert d.penalty("eth1", t) <= HL.DEFAULTS["max_penalty"]
    # after the storm: back within half_life * log2(max_penalty / reuse) (+ one tick)
    tr = run(d, t, t + 10.0, NICS)
    assert [x[1:] for x in tr] == [("eth1", "in")]
    assert tr[0][0] - t <= 2.0 * 2 + 0.15


def test_single_flap_not_suppressed_two_spread_flaps_not_suppressed():
    d = HL.Detector(NICS, now=0.0)
    d.down("eth0", 1.0, "link down")
    assert not d.nics["eth0"].suppressed
    tr = run(d, 1.1, 2.5, NICS)
    assert [x[1:] for x in tr] == [("eth0", "in")]
    d.down("eth0", 5.0, "link down")                # 4 s later: decayed to 250 + 1000 < 2000
    assert not d.nics["eth0"].suppressed


def test_effective_out_never_takes_the_last_nic():
    assert HL.effective_out({"eth0", "eth1"}, ["eth0", "eth1"]) == set()
    assert HL.effective_out({"eth0", "ethX"}, ["eth0", "eth1"]) == {"eth0"}


@pytest.mark.parametrize("params,field", [
    ({"interval_ms": 0}, "interval_ms"), ({"multiplier": "3"}, "multiplier"), ({"hold": 1}, "hold"),
    ({"reuse": 3000}, "reuse"), ({"max_penalty": 100}, "max_penalty"), ({"enabled": "yes"}, "enabled"),
])
def test_check_params_names_field_value_and_fix(params, field):
    with pytest.raises(ValueError) as e:
        HL.check_params(params)
    msg = str(e.value)
    assert "host_datapath_detection.%s" % field in msg and "Fix:" in msg


def test_check_params_defaults_and_none():
    assert HL.check_params(None) == HL.DEFAULTS
    assert HL.check_params({"hold_down": None, "interval_ms": 50})["interval_ms"] == 50


def _nic(idx, ifindex, flags):
    return struct.pack("<I", idx), struct.pack(HL.NIC_VAL, ifindex, flags, b"\x01" * 4, b"\x02" * 16)


def test_nic_flag_updates_sets_and_clears_only_what_differs():
    dump = dict([_nic(0, 5, 3), _nic(1, 6, 3 | HL.NIC_OUT), _nic(2, 7, 3), _nic(3, 0, 0)])
    ops = HL.nic_flag_updates(dump, {2})
    got = dict((struct.unpack("<I", k)[0], struct.unpack(HL.NIC_VAL, v)[1]) for k, v in ops)
    assert got == {1: 3, 2: 3 | HL.NIC_OUT}
    # value bytes other than flags unchanged
    assert dict(ops)[struct.pack("<I", 2)][8:] == dump[struct.pack("<I", 2)][8:]
    assert HL.nic_flag_updates(dump, {1}) == []


def test_loader_keeps_the_watchers_nic_out_bit():
    k, want = _nic(1, 6, 3)
    have = {k: struct.pack(HL.NIC_VAL, 6, 3 | HL.NIC_OUT, b"\x01" * 4, b"\x02" * 16)}
    assert bpf.keep_nic_out({k: want}, have) == have
    assert bpf.keep_nic_out({k: want}, {}) == {k: want}
    assert bpf.NIC_OUT == HL.NIC_OUT


def test_c_program_honours_nic_out():
    with open("roles/host_datapath/files/bpf/multinic_datapath.c") as f:
        src = f.read()
    assert "#define NIC_OUT %d" % HL.NIC_OUT in src
    assert "(n->flags & NIC_OUT)" in src


def _detect(plan, name="lab-r1-h2", ebpf=False):
    sp = datapath_spec.build_spec(plan[name], ebpf=ebpf)
    return sp, desired.runtime_commands(sp, "/sys/fs/bpf/netscale-multinic", HL.check_params(None))["detect"]


def test_runtime_detect_block(plan):
    sp, det = _detect(plan)
    assert [n["name"] for n in det["nics"]] == [n["name"] for n in sp["nics"]]
    assert det["nics"][1]["table"] == sp["table_base"] + 1
    assert det["nics"][1]["gw4"] == sp["nics"][1]["ipv4"]["gateway"]
    assert det["params"] == HL.DEFAULTS and det["ebpf"] is False
    assert "detect" not in desired.runtime_commands(sp, "/x", None)


def test_kernel_route_lines_drop_and_restore(plan):
    sp, det = _detect(plan)
    base = sp["table_base"]
    gw = dict((n["name"], n["gw4"]) for n in det["nics"])
    out = HL.kernel_route_lines(det, {"eth1"})["-4"]
    assert "route del default table %d metric 10" % (base + 1) in out
    fb = [l for l in out if "metric 20" in l]
    assert len(fb) == 4
    for line in fb:
        assert "dev eth1" not in line and line.count("nexthop") == 3
    back = HL.kernel_route_lines(det, set())
    assert "route replace default table %d metric 10 via %s dev eth1" % (base + 1, gw["eth1"]) in back["-4"]
    assert all(l.count("nexthop") == 4 for l in back["-6"] if "metric 20" in l)
    # three out of four: the fallback is a single route via the survivor
    one = HL.kernel_route_lines(det, {"eth0", "eth1", "eth2"})["-4"]
    assert "route replace default table %d metric 20 via %s dev eth3" % (base, gw["eth3"]) in one


def test_arp_frames_roundtrip():
    mac = b"\x02\x00\x00\x00\x00\x01"
    req = W.arp_request(mac, "198.18.0.2", "198.18.0.1")
    assert req[:6] == b"\xff" * 6 and req[12:14] == b"\x08\x06" and len(req) == 42
    assert W.arp_reply_from(req) is None                   # a request is not a reply
    gwmac = b"\x02\x00\x00\x00\x00\x09"
    reply = mac + gwmac + b"\x08\x06" + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 2, gwmac,
                                                    socket.inet_aton("198.18.0.1"), mac,
                                                    socket.inet_aton("198.18.0.2"))
    assert W.arp_reply_from(reply) == ("198.18.0.1", gwmac)
    assert W.arp_request(mac, None, "198.18.0.1", gwmac)[:6] == gwmac


def test_na_target_and_solicited_node():
    tgt = socket.inet_pton(socket.AF_INET6, "fd00:1::1")
    ip6 = struct.pack("!IHBB16s16s", 0x60000000, 32, 58, 255, b"\0" * 16, b"\0" * 16)
    frame = b"\0" * 12 + b"\x86\xdd" + ip6 + struct.pack("!BBHI16s", 136, 0, 0, 0x60000000, tgt)
    assert W.na_target(frame) == "fd00:1::1"
    assert W.na_target(frame[:60]) is None
    assert W.solicited_node("fd00:1::a:1234:5678") == "ff02::1:ff34:5678"


def test_neigh_event_pattern():
    m = W.NEIGH.match("198.18.0.1 dev eth1  FAILED")
    assert m and m.groups() == ("198.18.0.1", "eth1", "FAILED")
    assert W.NEIGH.match("198.18.0.1 dev eth1 lladdr 02:00:00:00:00:01 REACHABLE") is None


def test_reapply_after_link_up_leaves_the_own_route_of_a_nic_held_out(plan, tmp_path):
    sp = datapath_spec.build_spec(plan["lab-r1-h2"], ebpf=False)
    rt = desired.runtime_commands(sp, "/nonexistent", HL.check_params(None))
    path = tmp_path / "runtime.json"
    path.write_text(__import__("json").dumps(rt))
    gray = W.Health(str(path))
    assert gray.enabled and gray.skip_lines() == set()
    gray.detector.down("eth1", 1.0, "test")
    skip = gray.skip_lines()
    own = [" ".join(c[1:]) for c in rt["devices"]["eth1"] if c[0] == "-4" and "metric" in c and
           c[c.index("metric") + 1] == str(datapath_spec.METRIC_OWN)]
    assert own and set(own) <= skip
    assert all(line.endswith("dev eth1") for line in skip)
    dummy, batches = W.reapply_batches(rt, ["eth1"])
    assert set(own) <= set(batches["-4"])      # what reapply() then filters out with skip
