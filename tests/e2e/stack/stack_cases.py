# -*- coding: utf-8 -*-
"""Test cases of the whole stack on the lab, shared by test_stack_ebpf.py and test_stack_kernel.py
(each builds its own lab with a module-scoped fixture and deploys playbooks/site.yml in its mode).

Assertions are on observed state: ToR kernel FIB (`ip -j route`), frr_facts, NIC byte counters,
iperf3 per-stream 0.2 s intervals, systemd properties, before/after dumps of the hosts.
"""
import contextlib
import json
import os
import threading
import time
import warnings

import pytest

import mns_stack as M
from labkit.gray_stack import watcher_changes   # [(epoch, NIC, out|in, why)] from its journal

FLOWS = 32
RUN = 6


class Stack(object):
    def __init__(self, lab, mode, hosts, tors, outputs, before):
        self.lab = lab
        self.mode = mode
        self.hosts = hosts
        self.tors = tors
        self.out = outputs
        self.before = before


def require_live():
    if os.geteuid() != 0:
        pytest.fail("stack tests need root (lab: namespaces, cgroups, FRR, systemd hosts)")


def build_stack(mode, hosts, tors, check_fresh):
    """Lab + site.yml in the given mode. Returns (Stack, finalizer)."""
    require_live()
    os.makedirs(M.WORK, exist_ok=True)
    M.lab_teardown()
    M.lab_build()
    lab = M.Lab()
    limit = ["--limit", ",".join(tors + hosts)]
    extra = limit + ["-e", "host_datapath_ebpf=%s" % ("true" if mode == "ebpf" else "false")]
    out = {}
    before = dict((h, lab.dump(h)) for h in hosts)
    if check_fresh:
        out["check_fresh"] = M.site("--check", "--diff", *extra)
        out["after_check"] = dict((h, lab.dump(h)) for h in hosts)
    t0 = time.monotonic()
    out["run"] = M.site(*extra)
    out["run_s"] = time.monotonic() - t0
    out["deployed_at"] = time.time()   # a host session (re)established after this was reset after the deploy
    t0 = time.monotonic()
    out["rerun"] = M.site(*extra) if mode == "ebpf" else M.site("--check", "--diff", *extra)
    out["rerun_s"] = time.monotonic() - t0
    for h in hosts:   # line-rate emulation: 200 Mbit/s tbf on every NIC, both directions (as lab_link speed),
        lab.tbf(h, "200mbit")   # BFD in a control-plane band (labkit.stack_lab.Lab.tbf)
    return Stack(lab, mode, hosts, tors, out, before)


# ---- deploy ------------------------------------------------------------------------------------
def test_site_converges(stack):
    """check mode on the fresh lab shows changes and changes nothing; the run converges; the
    second run (eBPF module) / --check --diff (kernel module) reports 0 changed."""
    if "check_fresh" in stack.out:
        rc = M.recap(stack.out["check_fresh"].stdout)
        for h in stack.hosts + stack.tors:
            assert rc[h]["failed"] == 0 and rc[h]["unreachable"] == 0, rc
        for h in stack.hosts:
            assert rc[h]["changed"] > 0, "check mode on a fresh host must show changes: %s" % rc
            assert M.diff_dumps(stack.before[h], stack.out["after_check"][h]) == {}, "check mode changed %s" % h
    rc = M.recap(stack.out["run"].stdout)
    assert all(v["failed"] == 0 for v in rc.values()), rc
    again = M.recap(stack.out["rerun"].stdout)
    print("%s: deploy %.0f s, second run %.0f s, recap %s" % (stack.mode, stack.out["run_s"], stack.out["rerun_s"], again))
    for h in stack.hosts + stack.tors:
        assert again[h]["changed"] == 0 and again[h]["failed"] == 0, "second run on %s: %s" % (h, again[h])


def _fib_widths(lab, tor, want):
    fib = lab.tor_fib(tor)
    return dict((p, len(fib.get(p.split("/")[0], ()))) for p in want)


def _sessions_reset_after(neighbors, slot, since):
    """The sessions of one slot (one per NIC) in the ToR's ``show bgp neighbors json`` that are not Established or
    were established after ``since`` (epoch): {neighbor: (state, uptime s, lastResetDueTo)}."""
    age = time.time() - since
    out = {}
    for n in slot["nics"]:
        p = neighbors.get(n["address"]["ipv6"]) or {}
        up = p.get("bgpTimerUpMsec", 0) / 1000.0 if p.get("bgpState") == "Established" else 0.0
        if up < age:
            out[n["address"]["ipv6"]] = (p.get("bgpState"), round(up, 1), p.get("lastResetDueTo"))
    return out


def test_tor_fib_width(stack):
    """Every task IP (both slots, both families) in its ToR's kernel FIB with width = NIC count,
    the same in frr_facts; every host session Established.

    A width short of the NIC count passes only when, for every slot short of it, a session of that slot was
    reset after the deploy ended (BGP's own record: not Established, or up for less time than since the
    deploy) and the width comes back within 60 s; such a run is reported as a warning. A CI run of
    2026-11-29 read slot 2 of the 2-NIC host at width 1 in both families, the next test found every BFD peer
    up: on the lab's 2 loaded cores a 50 ms x 3 BFD session can time out without a fault (docs/lab.md).
    A short width with no session reset behind it fails at once."""
    lab = stack.lab
    for tor in stack.tors:
        want, slot_of = {}, {}
        for h in stack.hosts:
            if lab.tor_of(h) != tor:
                continue
            for s in lab.hosts[h]["slots"]:
                for fam in ("ipv4", "ipv6"):
                    want[s["task_ip"][fam]] = len(lab.hosts[h]["nics"])
                    slot_of[s["task_ip"][fam]] = (h, s)
        got = _fib_widths(lab, tor, want)
        if got != want:
            short = dict((p, slot_of[p]) for p in want if got[p] != want[p])
            neighbors = json.loads(lab.x(tor, ["vtysh", "-c", "show bgp neighbors json"]).stdout or "{}")
            resets = dict((p, _sessions_reset_after(neighbors, s, stack.out["deployed_at"])) for p, (h, s) in short.items())
            assert all(resets.values()), "%s kernel FIB widths %s, want %s; sessions of the short slots reset after " \
                "the deploy: %s" % (tor, got, want, resets)
            warnings.warn("%s kernel FIB widths %s short of %s after a session reset since the deploy (%s); waited "
                          "for them to come back" % (tor, got, want, resets))
            got = _until("%s kernel FIB widths" % tor, lambda: _fib_widths(lab, tor, want), lambda v: v == want, 60)
        assert got == want, "%s kernel FIB widths %s, want %s" % (tor, got, want)
        cidrs = dict((p + ("/128" if ":" in p else "/32"), n) for p, n in want.items())
        facts = M.adhoc(tor, "netscale.multinic.frr_facts", {"prefixes": sorted(cidrs)})
        assert facts["ecmp"] == cidrs, "%s frr_facts ecmp %s, want %s" % (tor, facts["ecmp"], cidrs)
        for name, s in facts["sessions"].items():
            if name.startswith("HOST-"):
                assert s["established"] == s["total"] > 0, "%s %s: %s" % (tor, name, s)
        print("%s: %s" % (tor, got))


def _steady_iperf(stack, host, fam, port, reverse, attempts=2):
    """A 32-flow run for byte shares over a healthy host's NICs: (iperf3 result, shares, total bytes, the NIC
    watcher's egress-set changes during the last run).

    A run starts once the watcher publishes every NIC in the egress set (within 20 s: a test before may have
    left a NIC in its hold-down). The shares are those of the whole egress set only when the watcher left it
    alone during the run (its journal): when it changed the set, that run measured the watcher, not the
    spread. It is then reported with the watcher's reasons and made again, at most ``attempts`` times in
    all; the caller asserts the last run's shares whatever the watcher did. (A CI run of 2026-11-28: eth2
    carried 0.0 of a 4-NIC egress run, the next run on the same host 0.25; on the lab's 2 loaded cores the
    50 ms x 3 detection can take a NIC out without a fault, docs/lab.md.)"""
    for attempt in range(1, attempts + 1):
        _until("%s: NICs out of the egress set before the run" % host, lambda: _published_out(stack.lab, host),
               lambda v: v == [], 20)
        since = time.time()
        res, sh, total = stack.lab.iperf(host, fam, port, flows=FLOWS, seconds=RUN, reverse=reverse, interval=1.0)
        changes = watcher_changes(stack.lab, host, since)
        if not changes or attempt == attempts:
            return res, sh, total, changes
        # a warning, so that pytest's summary shows it also when the second run passes (CI logs only failures)
        warnings.warn("%s %s %s: the NIC watcher changed the egress set during the run, measured again: shares %s, "
                      "changes %s" % (stack.mode, host, fam, dict((k, round(v, 3)) for k, v in sorted(sh.items())),
                                      changes))


def _spread(stack, host, fam, reverse, port):
    """The byte shares of ``host``'s NICs in a 32-flow run, each within +-5 points of 1/N."""
    n = len(stack.lab.nics(host))
    res, sh, total, changes = _steady_iperf(stack, host, fam, port, reverse)
    bps = res["end"]["sum_received"]["bits_per_second"] / 1e6
    print("%s %s %s %s: %.0f Mbit/s over %d NICs, shares %s; egress-set changes during the run %s" % (
        stack.mode, host, fam, "storage->task IP" if reverse else "container->storage", bps, n,
        dict((k, round(v, 3)) for k, v in sorted(sh.items())), changes))
    assert total > 0
    for nic, s in sh.items():
        assert abs(s - 1.0 / n) <= 0.05, "%s %s: NIC %s share %.3f, want %.3f +- 0.05 (%s); egress-set changes " \
            "during the run: %s" % (host, fam, nic, s, 1.0 / n, sh, changes)
    return bps


def _published_out(lab, host):
    """The NICs out of ``host``'s egress set, as its NIC watcher published them."""
    return json.loads(lab.x(host, ["cat", "/run/netscale-multinic/egress-state.json"]).stdout)["out_nics"]


SPREAD = [("mns-r1-h2", "ipv6", False), ("mns-r1-h2", "ipv4", True),
          ("mns-r1-h1", "ipv4", False), ("mns-r1-h1", "ipv6", True)]


@pytest.mark.parametrize("host,fam,reverse", SPREAD, ids=["4nic-egress-v6", "4nic-ingress-v4", "2nic-egress-v4",
                                                          "2nic-ingress-v6"])
def test_spread(stack, host, fam, reverse):
    """32 flows from a container to storage (egress) and storage -> task IP (ingress, iperf3 -R)
    spread over the host's tbf-limited NICs, each NIC's byte share within +-5 points of 1/N."""
    _spread(stack, host, fam, reverse, 5301 + SPREAD.index((host, fam, reverse)))


def test_host_local(stack):
    """Container <-> its own host works (host-local traffic left to the host stack)."""
    lab, host = stack.lab, "mns-r1-h2"
    for nic in lab.hosts[host]["nics"]:
        for fam in ("ipv4", "ipv6"):
            p = M.sh(lab.in_slot(host, 1, ["ping", "-c", "1", "-W", "2", nic["address"][fam]]), check=False)
            assert p.returncode == 0, "container -> host %s: %s" % (nic["address"][fam], p.stdout + p.stderr)
    for fam in ("ipv4", "ipv6"):
        tip = lab.task_ip(host, fam).split("/")[0]
        p = lab.x(host, ["ping", "-c", "1", "-W", "2", tip], check=False)
        assert p.returncode == 0, "host -> own container task IP %s: %s" % (tip, p.stdout + p.stderr)


def _flap(stack, host, kind, k, t_down, t_up, events):
    lab = stack.lab
    nic = lab.hosts[host]["nics"][k]
    tor = lab.tor_of(host)
    n = len(lab.hosts[host]["nics"])
    time.sleep(t_down)
    t0 = time.monotonic()
    events["down_at"] = time.time()
    if kind == "admin":
        M.sh(["ip", "-n", lab.netns(host), "link", "set", nic["name"], "down"])
    else:   # carrier loss on the host NIC: the ToR port goes away
        M.sh(["ip", "-n", lab.netns(tor), "link", "set", nic["tor_port"], "down"])
    try:
        events["out"] = lab.wait_width(host, n - 1, timeout=5)
    except AssertionError as e:
        events["out_error"] = str(e)
    time.sleep(max(0.0, t_up - t_down - (time.monotonic() - t0)))
    t1 = time.monotonic()
    if kind == "admin":
        M.sh(["ip", "-n", lab.netns(host), "link", "set", nic["name"], "up"])
    else:
        M.sh(["ip", "-n", lab.netns(tor), "link", "set", nic["tor_port"], "up"])
    try:
        events["back"] = lab.wait_width(host, n, timeout=30)
    except AssertionError as e:
        events["back_error"] = str(e)
    events["back_total"] = time.monotonic() - t1


def _max_stall_ending_after(result, t):
    """M.max_stall of the zero-byte runs that end after ``t`` s on iperf3's clock (a run ending before is left out)."""
    worst, runs = 0.0, {}
    for sid, nbytes, start, seconds in M.DH._zero_runs(result):   # pylint: disable=protected-access
        if nbytes == 0:
            st, ln = runs.get(sid, (start, 0.0))
            runs[sid] = (st, ln + seconds)
            if st is None or st + ln + seconds > t:
                worst = max(worst, ln + seconds)
        else:
            runs.pop(sid, None)
    return round(worst, 3)


def test_nic_failure(stack):
    """32 flows each way on the 4-NIC host; eth1 fails at 3 s and returns at 6 s: its next hop
    leaves the ToR FIB, no stream stalls > 1 s in either direction; after the return (no re-run)
    the session, the ECMP width and eth1's share come back. (A stall that ended 0.5 s before the NIC went down is
    the run's start, reported as a warning, not asserted.)

    One kind of failure per mode (CI time): eBPF mode the host NIC set down (the watcher re-applies
    what admin-down deleted), kernel mode the ToR port (carrier loss on the host). Both kinds in both
    modes run in tests/e2e/datapath/test_datapath_traffic.py::test_nic_failure (no FRR there)."""
    kind = "admin" if stack.mode == "ebpf" else "carrier"
    lab, host = stack.lab, "mns-r1-h2"
    results, events, started = {}, {}, {}

    def run(name, fam, port, reverse):
        try:
            started[name] = time.time()
            results[name] = lab.iperf(host, fam, port, flows=FLOWS, seconds=10, reverse=reverse, interval=0.2)[0]
        except AssertionError as e:
            results[name] = {"error": str(e)}

    base = 5320 if kind == "admin" else 5330
    threads = [threading.Thread(target=run, args=("egress", "ipv6", base + 1, False)),
               threading.Thread(target=run, args=("ingress", "ipv4", base + 2, True)),
               threading.Thread(target=_flap, args=(stack, host, kind, 1, 3.0, 6.0, events))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    for name, res in results.items():
        assert "error" not in res, "%s: %s" % (name, res["error"])
    # per stream, where the bytes arrive (M.by_end: the sender's view counts socket writes)
    received, sent = M.by_end(results)
    worst = dict((k, M.max_stall(v)) for k, v in received.items())
    print("%s %s: next hop out of the ToR FIB after %s s, back %s s after the NIC (no re-run); worst stream "
          "stall at the receiver %s; stalls >= 0.4 s (start, length): %s; sender-side view (socket writes, "
          "not asserted): %s" % (
              stack.mode, kind, round(events.get("out", -1), 3), round(events.get("back", -1), 2), worst,
              dict((k, M.stalls(v)) for k, v in received.items()),
              dict((k, M.max_stall(v)) for k, v in sent.items())))
    assert "out_error" not in events, events
    assert "back_error" not in events, events
    for k, v in worst.items():
        # The bound is the failure's: a stall that ended 0.5 s or more before the NIC went down (on iperf3's clock,
        # which starts after the call) is the run's start, not the failure. A CI run of 2026-11-29 had one ingress
        # stream of 32 stall 1.4 s from 0.6 s, the NIC going down at 3 s: slow start into the ToR ports' tbf.
        # Such a stall is reported as a warning; every stall that reaches the failure's window is asserted.
        cut = events["down_at"] - started[k] - 0.5
        at_failure = _max_stall_ending_after(received[k], cut)
        if at_failure <= 1.0 < v:
            warnings.warn("%s %s %s: a stream stalled %.1f s before the failure (ended before %.1f s), %.1f s at "
                          "most from then; stalls %s" % (stack.mode, kind, k, v, cut, at_failure, M.stalls(received[k])))
        assert at_failure <= 1.0, "%s %s %s: a stream stalled %.1f s" % (stack.mode, kind, k, at_failure)
    # share after the return, one direction at a time
    time.sleep(0.5)
    for label, fam, reverse in (("egress", "ipv6", False), ("ingress", "ipv4", True)):
        dummy, sh, dummy2, changes = _steady_iperf(stack, host, fam, base + 3 + int(reverse), reverse)
        print("after recovery %s shares %s; egress-set changes during the run %s" % (
            label, dict((k, round(v, 3)) for k, v in sorted(sh.items())), changes))
        assert abs(sh["eth1"] - 0.25) <= 0.05, "%s: eth1 share %.3f after recovery (%s); egress-set changes during " \
            "the run: %s" % (label, sh["eth1"], sh, changes)


def test_bfd_up_on_every_host_session(stack):
    """BFD on every host session (issue 12 item 1): on each ToR, every BGP neighbor of a deployed host (one per
    slot and NIC) has a BFD peer Up against the responder beside its sidecar, same addresses, the lab's
    timers (inventories/lab/group_vars/all/lab.yml, 50 ms x 3) on both ends; single hop in eBPF mode,
    multihop in kernel mode (the host's forwarding lowers the TTL)."""
    lab = stack.lab
    multihop = stack.mode == "kernel"
    bfd = M.lab_vars()["tor_bgp_options"]["bfd"]
    timers = (bfd["interval_ms"], bfd["interval_ms"], bfd["multiplier"], bfd["interval_ms"], bfd["multiplier"])
    for tor in stack.tors:
        peers = dict((p["peer"], p) for p in json.loads(lab.x(tor, ["vtysh", "-c", "show bfd peers json"]).stdout))
        want = {}
        for h in stack.hosts:
            if lab.tor_of(h) != tor:
                continue
            for s in lab.hosts[h]["slots"]:
                for n in s["nics"]:
                    want[n["address"]["ipv6"]] = lab.hosts[h]["nics"][n["index"]]["gateway"]["ipv6"]
        got = dict((a, (peers.get(a, {}).get("status"), peers.get(a, {}).get("local"), peers.get(a, {}).get("multihop")))
                   for a in want)
        assert got == dict((a, ("up", gw, multihop)) for a, gw in want.items()), "%s BFD peers: %s" % (tor, got)
        for a in want:
            p = peers[a]
            assert (p["receive-interval"], p["transmit-interval"], p["detect-multiplier"], p["remote-receive-interval"],
                    p["remote-detect-multiplier"]) == timers, p
        print("%s: %d host BFD sessions up (multihop: %s, %d ms x %d)"
              % (tor, len(want), multihop, bfd["interval_ms"], bfd["multiplier"]))


# ---- BFD drives the host's egress set (issue 12 item 2) -----------------------------------------
WATCHER = "netscale-multinic-watcher.service"


def _egress_out(lab, host):
    """{NIC name: NIC_OUT set?} of the newest pinned mn_nics of the host (eBPF mode)."""
    import struct
    from ansible_collections.netscale.multinic.plugins.module_utils.datapath import health
    pins = lab.x(host, ["sh", "-c", "ls -d /sys/fs/bpf/netscale-multinic/v-*/maps/mn_nics"]).stdout.split()
    assert pins, "%s: no pinned mn_nics" % host
    flags = {}
    for e in json.loads(lab.x(host, ["bpftool", "-j", "map", "dump", "pinned", sorted(pins)[-1]]).stdout):
        idx = struct.unpack("<I", bytes(int(x, 16) for x in e["key"]))[0]
        flags[idx] = struct.unpack(health.NIC_VAL, bytes(int(x, 16) for x in e["value"]))[1]
    return dict((n["name"], bool(flags.get(n["index"], 0) & health.NIC_OUT)) for n in lab.hosts[host]["nics"])


def _tor_bfd(lab, tor, peers):
    got = dict((p["peer"], p.get("status")) for p in json.loads(lab.x(tor, ["vtysh", "-c", "show bfd peers json"]).stdout))
    return dict((a, got.get(a)) for a in peers)


def _until(what, probe, ok, timeout):
    deadline = time.monotonic() + timeout
    while True:
        v = probe()
        if ok(v):
            return v
        if time.monotonic() > deadline:
            raise AssertionError("%s: still %s after %.0f s" % (what, v, timeout))
        time.sleep(0.1)


def _watcher_tail(lab, host, lines=40):
    return lab.x(host, ["journalctl", "-u", WATCHER, "-n", str(lines), "-o", "cat", "--no-pager"], check=False).stdout


def _with_watcher_log(stack, case):
    """Run ``case(stack)``; a failure carries the watcher's log of mns-r1-h2."""
    try:
        case(stack)
    except AssertionError as e:
        raise AssertionError("%s\nwatcher log of mns-r1-h2:\n%s" % (e, _watcher_tail(stack.lab, "mns-r1-h2")))


@contextlib.contextmanager
def _tor_port_fault(lab, tor, port, kind):
    """A loss fault of ``kind`` (lab/faults.py: bfd, arp_nd, ...) both ways on ToR port ``port`` while the
    block runs; its nft tables are removed afterwards, also on failure."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab import faults
    tables = faults.wanted_tables(port, True, "both", kind)
    ns = lab.netns(tor)
    try:
        M.sh(["ip", "netns", "exec", ns, "nft", "-f", "-"], input="".join(tables[t] for t in sorted(tables)))
        yield
    finally:
        for t in sorted(tables):
            M.sh(["ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", t], check=False)


def test_bfd_loss_takes_the_nic_out_of_the_egress_set(stack):
    """Only BFD control packets (UDP 3784/4784, both ways) dropped at the ToR port of mns-r1-h2's eth1:
    ARP/ND, BGP and traffic still pass, so the watcher's gateway probe sees a healthy NIC - only BFD can
    tell. The ToR's BFD peers for eth1 (one per slot) go down, the host's egress set drops eth1 (NIC_OUT
    in mn_nics) and the watcher logs why (bfd); after the rule is removed the peers come back up, eth1
    is back in the egress set and the ToR FIB width is back to 4. Waits are generous, nothing is timed
    (figures: bench/)."""
    _with_watcher_log(stack, _bfd_loss)


def _bfd_loss(stack):
    lab, host, k = stack.lab, "mns-r1-h2", 1
    nic = lab.hosts[host]["nics"][k]
    tor, n = lab.tor_of(host), len(lab.hosts[host]["nics"])
    peers = [sn["address"]["ipv6"] for s in lab.hosts[host]["slots"] for sn in s["nics"] if int(sn["index"]) == k]
    assert len(peers) == len(lab.hosts[host]["slots"]) >= 1, peers
    lab.wait_width(host, n, timeout=30)
    _until("ToR BFD peers of %s %s" % (host, nic["name"]), lambda: _tor_bfd(lab, tor, peers),
           lambda v: all(x == "up" for x in v.values()), 30)
    assert _egress_out(lab, host) == dict((x, False) for x in lab.nics(host)), "a NIC is out before the fault"
    logged0 = _journal_count(lab, host, WATCHER, "egress set: %s OUT (bfd" % nic["name"])
    with _tor_port_fault(lab, tor, nic["tor_port"], "bfd"):
        bfd_down = _until("ToR BFD peers of %s %s under BFD loss" % (host, nic["name"]),
                          lambda: _tor_bfd(lab, tor, peers), lambda v: all(x == "down" for x in v.values()), 20)
        out = _until("%s egress set" % host, lambda: _egress_out(lab, host), lambda v: v[nic["name"]], 20)
        assert [x for x, o in out.items() if o] == [nic["name"]], out
        logged = _journal_count(lab, host, WATCHER, "egress set: %s OUT (bfd" % nic["name"]) - logged0
        assert logged >= 1, "the watcher did not log eth1 OUT (bfd ...)"
        # ARP/ND still answered: the host's gateway neighbour entry for eth1 is not FAILED
        neigh = json.loads(lab.x(host, ["ip", "-j", "neigh", "show", "dev", nic["name"]]).stdout)
        assert not any("FAILED" in e.get("state", []) for e in neigh), neigh
        fib_during = lab.width(host)
    _until("ToR BFD peers of %s %s after healing" % (host, nic["name"]), lambda: _tor_bfd(lab, tor, peers),
           lambda v: all(x == "up" for x in v.values()), 30)
    back = _until("%s egress set after healing" % host, lambda: _egress_out(lab, host),
                  lambda v: not any(v.values()), 30)
    lab.wait_width(host, n, timeout=60)
    tail = [x for x in _watcher_tail(lab, host, 60).splitlines() if "bfd" in x or "egress set" in x][-8:]
    print("%s BFD loss on %s (%s): ToR peers %s, egress out %s, ToR FIB width during %s; healed: %s, width %d; "
          "watcher: %s" % (stack.mode, nic["name"], nic["tor_port"], bfd_down, [x for x, o in out.items() if o],
                           fib_during, back, n, tail))


def _tor_bgp_states(lab, tor, peers):
    js = json.loads(lab.x(tor, ["vtysh", "-c", "show bgp neighbors json"]).stdout)
    return dict((a, (js.get(a) or {}).get("bgpState")) for a in peers)


def _sidecar_reasons(lab, host, slot, k):
    st = json.loads(lab.x(host, ["cat", "/run/netscale-vipinjector/slot%d/status.json" % slot]).stdout)
    return [(x["reason"], x["announced"]) for x in st["sessions"] if int(x["nic"]) == k]


def test_arp_nd_loss_withdraws_the_nic_at_the_tor(stack):
    """Only ARP/ND replies dropped at the ToR port of mns-r1-h2's eth1 (both ways): BFD, BGP and data
    still pass, so the ToR itself sees nothing wrong, while the host's watcher finds the gateway silent and
    takes eth1 out of its egress set. The sidecars read the watcher's published egress set and withdraw the
    task IPs on eth1's sessions: the ToR FIB width of every slot drops to N-1 with eth1's BGP sessions still
    Established and its BFD peers still up; the helper's status names the reason. After healing eth1 is
    announced again and the width is back to N. Waits are generous, nothing is timed (figures: bench/)."""
    _with_watcher_log(stack, _arp_nd_loss)


def _arp_nd_loss(stack):
    lab, host, k = stack.lab, "mns-r1-h2", 1
    nic = lab.hosts[host]["nics"][k]
    tor, n = lab.tor_of(host), len(lab.hosts[host]["nics"])
    slots = [int(s["slot"]) for s in lab.hosts[host]["slots"]]
    peers = [sn["address"]["ipv6"] for s in lab.hosts[host]["slots"] for sn in s["nics"] if int(sn["index"]) == k]
    for slot in slots:
        lab.wait_width(host, n, slot=slot, timeout=30)
    _until("ToR BFD peers of %s %s" % (host, nic["name"]), lambda: _tor_bfd(lab, tor, peers),
           lambda v: all(x == "up" for x in v.values()), 30)
    with _tor_port_fault(lab, tor, nic["tor_port"], "arp_nd"):
        widths = {}
        for slot in slots:
            widths[slot] = _until("ToR FIB width of %s slot %d under ARP/ND reply loss" % (host, slot),
                                  lambda slot=slot: lab.width(host, slot),
                                  lambda v: all(x == n - 1 for x in v.values()), 20)
        # the ToR did not find the fault itself: its sessions on eth1 are up
        bgp, bfd = _tor_bgp_states(lab, tor, peers), _tor_bfd(lab, tor, peers)
        assert all(x == "Established" for x in bgp.values()), bgp
        assert all(x == "up" for x in bfd.values()), bfd
        gone = set(lab.tor_fib(tor).get(lab.task_ip(host, "ipv6", 1).split("/")[0], ()))
        assert not any(x.endswith("@" + nic["tor_port"]) for x in gone), gone
        reasons = dict((slot, _sidecar_reasons(lab, host, slot, k)) for slot in slots)
        assert all(r == [("NIC out of the host's egress set", [])] for r in reasons.values()), reasons
    for slot in slots:
        lab.wait_width(host, n, slot=slot, timeout=60)
    back = dict((slot, _sidecar_reasons(lab, host, slot, k)) for slot in slots)
    assert all(r and r[0][0] == "healthy" and r[0][1] for r in back.values()), back
    print("%s ARP/ND reply loss on %s (%s): ToR widths %s with eth1 sessions %s, BFD %s; helper %s; healed: %s" % (
        stack.mode, nic["name"], nic["tor_port"], widths, bgp, bfd, reasons, back))


# ---- sidecar lifecycle (issue 6) ---------------------------------------------------------------
SIDE_HOST = "mns-r1-h2"


def _unit_prop(lab, host, unit, prop):
    return lab.x(host, ["systemctl", "show", "-p", prop, "--value", unit]).stdout.strip()


def test_sidecar_killed_restarts(stack):
    """SIGKILL to the sidecar's main PID (from systemd): systemd restarts it and the routes return."""
    lab, unit = stack.lab, "netscale-vipinjector@1.service"
    n = len(lab.nics(SIDE_HOST))
    pid0 = int(_unit_prop(lab, SIDE_HOST, unit, "MainPID"))
    restarts0 = int(_unit_prop(lab, SIDE_HOST, unit, "NRestarts"))
    assert pid0 > 0
    t0 = time.monotonic()
    lab.x(SIDE_HOST, ["kill", "-KILL", str(pid0)])
    lab.wait_width(SIDE_HOST, 0, timeout=15)
    gone = time.monotonic() - t0
    back = lab.wait_width(SIDE_HOST, n, timeout=30) + gone
    pid1 = int(_unit_prop(lab, SIDE_HOST, unit, "MainPID"))
    restarts1 = int(_unit_prop(lab, SIDE_HOST, unit, "NRestarts"))
    print("SIGKILL: routes gone after %.2f s, back at full width %.2f s after the kill (restarts %d -> %d)"
          % (gone, back, restarts0, restarts1))
    assert pid1 > 0 and pid1 != pid0 and restarts1 == restarts0 + 1


def _journal_count(lab, host, unit, text):
    p = lab.x(host, ["journalctl", "-u", unit, "-o", "cat", "--no-pager"], check=False)
    return p.stdout.count(text)


def test_sidecar_hung_watchdog_restarts(stack):
    """SIGSTOP on the sidecar's ExaBGP (issue 12 item 3): the helper's watchdog sees its acks stop and
    SIGKILLs it, the kernel closes the sessions, the ToR drops the task routes; systemd restarts the unit
    and the routes come back. Without the watchdog the stopped process would stay (MainPID unchanged, no
    restart) and the ToR would keep the routes until the hold timer. Times are printed (bench:
    bench/vipinjector_hang.py), not asserted."""
    lab, unit = stack.lab, "netscale-vipinjector@1.service"
    n = len(lab.nics(SIDE_HOST))
    lab.wait_width(SIDE_HOST, n, timeout=30)
    pid0 = int(_unit_prop(lab, SIDE_HOST, unit, "MainPID"))
    restarts0 = int(_unit_prop(lab, SIDE_HOST, unit, "NRestarts"))
    fired0 = _journal_count(lab, SIDE_HOST, unit, "watchdog: ExaBGP")
    assert pid0 > 0
    t0 = time.monotonic()
    lab.x(SIDE_HOST, ["kill", "-STOP", str(pid0)])
    try:
        lab.wait_width(SIDE_HOST, 0, timeout=15)
        gone = time.monotonic() - t0
        back = lab.wait_width(SIDE_HOST, n, timeout=30) + gone
    finally:
        # cleanup by PID: if the stopped process is still there, wake and kill it (systemd restarts the unit)
        if lab.x(SIDE_HOST, ["kill", "-0", str(pid0)], check=False).returncode == 0:
            lab.x(SIDE_HOST, ["kill", "-CONT", str(pid0)], check=False)
            lab.x(SIDE_HOST, ["kill", "-KILL", str(pid0)], check=False)
    assert lab.x(SIDE_HOST, ["kill", "-0", str(pid0)], check=False).returncode != 0, "the stopped ExaBGP is still there"
    pid1 = int(_unit_prop(lab, SIDE_HOST, unit, "MainPID"))
    restarts1 = int(_unit_prop(lab, SIDE_HOST, unit, "NRestarts"))
    assert pid1 > 0 and pid1 != pid0 and restarts1 == restarts0 + 1, (pid0, pid1, restarts0, restarts1)
    fired = 0
    for dummy in range(20):  # journald may lag a little behind the unit
        fired = _journal_count(lab, SIDE_HOST, unit, "watchdog: ExaBGP") - fired0
        if fired:
            break
        time.sleep(0.1)
    assert fired == 1, "the helper's watchdog did not log the kill (%d lines)" % fired
    cidrs = {lab.task_ip(SIDE_HOST, "ipv4") + "/32": n, lab.task_ip(SIDE_HOST, "ipv6") + "/128": n}
    facts = M.adhoc(lab.tor_of(SIDE_HOST), "netscale.multinic.frr_facts", {"prefixes": sorted(cidrs)})
    assert facts["ecmp"] == cidrs, facts.get("ecmp")
    host_sessions = [s for name, s in facts["sessions"].items() if name.startswith("HOST-")]
    assert host_sessions and all(s["established"] == s["total"] for s in host_sessions), facts["sessions"]
    print("SIGSTOP: routes gone after %.2f s (watchdog SIGKILL), back at full width %.2f s after the stop "
          "(restarts %d -> %d)" % (gone, back, restarts0, restarts1))


def _ping_task_ip(lab, host, fam):
    tip = lab.task_ip(host, fam)
    return M.sh(["nsenter", "--net=/run/netns/%s" % lab.netns("mns-storage"), "--", "ping", "-c", "3", "-i", "0.2",
                 "-W", "2", tip], check=False)


def test_sidecar_stopped_degrades_to_nic0(stack):
    """Sidecar stopped: the task routes leave the ToR, the task IP stays reachable from storage
    through the NIC-0 subnet route (proxy on NIC 0); started again: full width."""
    lab, unit = stack.lab, "netscale-vipinjector@1.service"
    n = len(lab.nics(SIDE_HOST))
    lab.x(SIDE_HOST, ["systemctl", "stop", unit])
    try:
        lab.wait_width(SIDE_HOST, 0, timeout=10)
        for fam in ("ipv4", "ipv6"):
            p = _ping_task_ip(lab, SIDE_HOST, fam)
            assert p.returncode == 0, "storage -> %s without BGP: %s" % (lab.task_ip(SIDE_HOST, fam), p.stdout + p.stderr)
        rx0 = lab.nic_bytes(SIDE_HOST, "rx")
        _ping_task_ip(lab, SIDE_HOST, "ipv4")
        rx1 = lab.nic_bytes(SIDE_HOST, "rx")
        assert rx1["eth0"] > rx0["eth0"], "degraded path must enter through eth0: %s -> %s" % (rx0, rx1)
    finally:
        lab.x(SIDE_HOST, ["systemctl", "start", unit])
    print("restarted: full width after %.2f s" % lab.wait_width(SIDE_HOST, n, timeout=30))


def test_drain_file(stack):
    """Drain file -> withdrawn within one interval (1 s); removed -> announced again."""
    lab = stack.lab
    n = len(lab.nics(SIDE_HOST))
    drain = "/run/netscale-vipinjector/slot1.drain"
    lab.x(SIDE_HOST, ["touch", drain])
    try:
        t_out = lab.wait_width(SIDE_HOST, 0, timeout=5)
    finally:
        lab.x(SIDE_HOST, ["rm", "-f", drain])
    t_back = lab.wait_width(SIDE_HOST, n, timeout=10)
    print("drain: withdrawn from the ToR FIB in %.2f s, back in %.2f s" % (t_out, t_back))
    assert t_out <= 1.0, "drain took %.2f s (> one 1 s interval)" % t_out


def test_guard_refuses_foreign_task_ip(stack):
    """A hand-edited config announcing another host's task IP: the unit refuses to start (guard),
    and the same announcement sent without the guard is rejected by the ToR policy."""
    lab, unit = stack.lab, "netscale-vipinjector@1.service"
    n = len(lab.nics(SIDE_HOST))
    foreign_host = "mns-r1-h1"
    foreign = lab.task_ip(foreign_host, "ipv4")
    tor = lab.tor_of(SIDE_HOST)
    conf = "/etc/netscale-vipinjector/slot1/exabgp.conf"
    fib_before = lab.tor_fib(tor).get(foreign)
    assert fib_before and len(fib_before) == len(lab.nics(foreign_host))
    lab.x(SIDE_HOST, ["cp", "-p", conf, "/root/mns-exabgp.conf.orig"])
    try:
        lab.x(SIDE_HOST, ["sed", "-i", "s|hold-time 9;|hold-time 9; static { route %s/32 next-hop self; }|" % foreign, conf])
        p = lab.x(SIDE_HOST, ["systemctl", "restart", unit], check=False)
        assert p.returncode != 0, "a config announcing %s must not start" % foreign
        log = lab.x(SIDE_HOST, ["journalctl", "-u", unit, "-n", "30", "--no-pager"]).stdout
        assert "guard" in log and foreign in log, log[-1500:]
        # the same announcement without the guard: a bare ExaBGP in the slot namespace, NIC 0 session
        nic0 = lab.hosts[SIDE_HOST]["slots"][0]["nics"][0]
        gw0 = lab.hosts[SIDE_HOST]["nics"][0]["gateway"]["ipv6"]
        # a compromised host has root: it reads the host's TCP-MD5 key from the sidecar's config (the lab
        # requires MD5, so without the key no session would come up). Kept in memory, never printed.
        md5 = [ln.strip() for ln in lab.x(SIDE_HOST, ["cat", conf]).stdout.splitlines()
               if ln.strip().startswith("md5-password ")]
        assert md5, "the lab's sidecar config carries no md5-password (the lab requires MD5)"
        rogue = ("neighbor %s { router-id %s; local-address %s; local-as %d; peer-as %d; hold-time 9; outgoing-ttl 255;"
                 " %s family { ipv4 unicast; } static { route %s/32 next-hop %s; } }\n" % (
                     gw0, lab.task_ip(SIDE_HOST, "ipv4"), nic0["address"]["ipv6"], lab.hosts[SIDE_HOST]["asn"],
                     lab.hosts[SIDE_HOST]["tor_asn"], md5[0], foreign, nic0["address"]["ipv4"]))
        M.sh(lab.nsx(SIDE_HOST) + ["sh", "-c", "umask 077; cat > /run/mns-rogue.conf"], input=rogue)
        lab.x(SIDE_HOST, ["systemd-run", "--unit", "mns-rogue", "-p", "NetworkNamespacePath=/run/netns/mn-slot1",
                          "--setenv", "exabgp_api_cli=false",
                          "/opt/netscale-vipinjector/venv/bin/exabgp", "server", "/run/mns-rogue.conf"])
        peer = nic0["address"]["ipv6"]
        deadline = time.monotonic() + 20
        nb = {}
        while time.monotonic() < deadline:
            nb = __import__("json").loads(lab.x(tor, ["vtysh", "-c", "show bgp neighbors %s json" % peer]).stdout).get(peer, {})
            if nb.get("bgpState") == "Established":
                break
            time.sleep(0.2)
        assert nb.get("bgpState") == "Established", "rogue session: %s" % nb.get("bgpState")
        time.sleep(1.5)
        af = nb.get("addressFamilyInfo", {}).get("ipv4Unicast", {})
        nb = __import__("json").loads(lab.x(tor, ["vtysh", "-c", "show bgp neighbors %s json" % peer]).stdout).get(peer, {})
        af = nb.get("addressFamilyInfo", {}).get("ipv4Unicast", {})
        assert af.get("acceptedPrefixCounter", 0) == 0, "ToR accepted %s from %s: %s" % (foreign, SIDE_HOST, af)
        assert lab.tor_fib(tor).get(foreign) == fib_before, "ToR FIB for %s changed: %s" % (foreign, lab.tor_fib(tor).get(foreign))
        print("guard: unit refused to start; ToR: session Established, accepted prefixes %s, FIB for %s unchanged"
              % (af.get("acceptedPrefixCounter"), foreign))
    finally:
        lab.x(SIDE_HOST, ["systemctl", "stop", "mns-rogue"], check=False)
        lab.x(SIDE_HOST, ["rm", "-f", "/run/mns-rogue.conf"], check=False)
        lab.x(SIDE_HOST, ["cp", "-p", "/root/mns-exabgp.conf.orig", conf])
        lab.x(SIDE_HOST, ["rm", "-f", "/root/mns-exabgp.conf.orig"])
        lab.x(SIDE_HOST, ["systemctl", "reset-failed", unit], check=False)
        lab.x(SIDE_HOST, ["systemctl", "start", unit], check=False)
    lab.wait_width(SIDE_HOST, n, timeout=30)


# ---- bad input (issue 5): fails before any change ----------------------------------------------
BAD = {
    "nic_count": ("nic_count", lambda h: dict(h, nics=h["nics"][:2], nic_count=2,
                                              slots=[dict(s, nics=s["nics"][:2]) for s in h["slots"]])),
    "missing_nic": ("not found on host", lambda h: dict(h, nics=h["nics"][:3] + [dict(h["nics"][3], name="eth7")])),
    "no_plan": ("the plan has no entry", lambda h: None),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input(stack, case):
    import json
    lab, host = stack.lab, "mns-r2-h1" if "mns-r2-h1" in stack.hosts else stack.hosts[0]
    text, mutate = BAD[case]
    before = lab.dump(host)
    path = os.path.join(M.WORK, "bad-%s.json" % case)
    with open(path, "w") as f:
        json.dump({"host_datapath_plan": mutate(lab.hosts[host])}, f)
    p = M.site("--limit", host, "-e", "@" + path, "-e", "host_datapath_ebpf=%s" % str(stack.mode == "ebpf").lower(),
               check=False)
    assert p.returncode != 0, "bad input %s must fail" % case
    assert text in p.stdout, "bad input %s: message should contain %r:\n%s" % (case, text, p.stdout[-3000:])
    changed = M.diff_dumps(before, lab.dump(host))
    assert changed == {}, "bad input %s changed the host: %s" % (case, str(changed)[:3000])


# ---- anti-spoofing (issue 13, deliverable 4) ----------------------------------------------------
# Run with the lab's python3: inside a slot (sender) and in a node's network namespace (capture).
SPOOF_SENDER = r"""
import json, socket, struct, sys
def csum(b):
    b += b"\0" * (len(b) % 2)
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
sent = {}
for src, dst, count, marker in json.loads(sys.argv[1]):
    data = marker.encode()
    n = 8 + len(data)
    if ":" in src:
        s6, d6 = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
        c = csum(s6 + d6 + struct.pack("!I3xB", n, 17) + struct.pack("!HHHH", 40000, 9, n, 0) + data) or 0xffff
        pkt = struct.pack("!IHBB", 6 << 28, n, 17, 64) + s6 + d6 + struct.pack("!HHHH", 40000, 9, n, c) + data
        sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)   # implies IPV6_HDRINCL
    else:
        pkt = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + n, 0, 0, 64, 17, 0, socket.inet_aton(src),
                          socket.inet_aton(dst)) + struct.pack("!HHHH", 40000, 9, n, 0) + data
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)    # implies IP_HDRINCL
    for i in range(count):
        sock.sendto(pkt, (dst, 0))
        sent[src] = sent.get(src, 0) + 1
print(json.dumps(sent))
"""
SPOOF_CAPTURE = r"""
import json, os, select, socket, sys
ifaces, marker, outgoing = sys.argv[1].split(","), sys.argv[2].encode(), sys.argv[3] == "out"
socks = {}
for i in ifaces:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((i, 0))
    socks[s.fileno()] = (i, s)
print("ready", flush=True)
seen = {}
while True:
    r = select.select(list(socks) + [0], [], [])[0]
    if 0 in r and not os.read(0, 4096):
        break
    for fd in r:
        if fd == 0:
            continue
        name, s = socks[fd]
        data, addr = s.recvfrom(65535)
        if (addr[2] == socket.PACKET_OUTGOING) != outgoing or marker not in data:
            continue
        if data[12:14] == b"\x08\x00" and data[23] == 17:
            src = socket.inet_ntop(socket.AF_INET, data[26:30])
        elif data[12:14] == b"\x86\xdd" and data[20] == 17:
            src = socket.inet_ntop(socket.AF_INET6, data[22:38])
        else:
            continue
        key = name + "|" + src
        seen[key] = seen.get(key, 0) + 1
print(json.dumps(seen), flush=True)
"""


def _spoofed_drops(lab, host):
    res = M.adhoc(host, "netscale.multinic.multinic_facts", {"state_dir": "/var/lib/netscale-multinic"})
    assert "ansible_facts" in res, "multinic_facts on %s: %s" % (host, res)
    st = res["ansible_facts"]["multinic"]["state"]
    return st["spoof_counter"], st["spoofed_drops"]


def test_antispoof(stack):
    """From slot 1 of the 4-NIC host, raw-socket UDP to storage with the source of slot 2's task IP,
    another host's task IP, the host's own NIC address and a random unused lab address (both
    families): none is seen leaving any host NIC or arriving on the ToR ports, the slot's
    spoofed_drops (multinic_facts) grows by exactly the number sent, slot 2's does not; in the same
    run slot 1's own task IPs (same sender, same marker) reach the ToR, ping to storage works and
    the BGP sessions (container addresses) stay up."""
    import ipaddress
    import json
    import random
    import subprocess

    lab, host, other = stack.lab, "mns-r1-h2", "mns-r1-h1"
    tor = lab.tor_of(host)
    h = lab.hosts[host]
    n = len(h["nics"])
    marker = "mnspoof-%08x" % random.getrandbits(32)
    rnd4, rnd6 = "198.19.200.%d" % random.randint(2, 250), "fd00:77::%x" % random.randint(2, 0xfffe)

    def a(text):
        return str(ipaddress.ip_address(text.split("/")[0]))

    spoofed = dict((fam, [a(lab.task_ip(host, fam, 2)), a(lab.task_ip(other, fam, 1)), a(h["nics"][0]["address"][fam]),
                          a(rnd)]) for fam, rnd in (("ipv4", rnd4), ("ipv6", rnd6)))
    own = dict((fam, a(lab.task_ip(host, fam, 1))) for fam in ("ipv4", "ipv6"))
    count = 5
    dst = {"ipv4": M.STO4, "ipv6": M.STO6}
    plan = [(src, dst[fam], count, marker) for fam in ("ipv4", "ipv6") for src in spoofed[fam]]
    plan += [(own[fam], dst[fam], count, marker) for fam in ("ipv4", "ipv6")]
    source0, drops0 = _spoofed_drops(lab, host)
    assert source0 == ("ebpf:mn_spoof" if stack.mode == "ebpf" else "nftables:netdev netscale_multinic"), source0
    caps = []
    try:
        for ns, devs, direction in ((lab.netns(host), [x["name"] for x in h["nics"]], "out"),
                                    (lab.netns(tor), [x["tor_port"] for x in h["nics"]], "in")):
            p = subprocess.Popen(["nsenter", "--net=/run/netns/%s" % ns, "--", "python3", "-c", SPOOF_CAPTURE,
                                  ",".join(devs), marker, direction], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, universal_newlines=True, start_new_session=True)
            caps.append(p)
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        sent = json.loads(M.sh(lab.in_slot(host, 1, ["python3", "-c", SPOOF_SENDER, json.dumps(plan)])).stdout)
        pings = dict((fam, M.sh(lab.in_slot(host, 1, ["ping", "-c", "3", "-i", "0.2", "-W", "2", dst[fam]]), check=False))
                     for fam in ("ipv4", "ipv6"))
        source1, drops1 = _spoofed_drops(lab, host)   # also the time the captures keep running
        seen = []
        for p in caps:
            out, err = p.communicate("", timeout=30)
            seen.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in caps:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    at_nics, at_tor = seen

    def by_src(cap):
        out = {}
        for key, v in cap.items():
            src = key.split("|", 1)[1]
            out[src] = out.get(src, 0) + v
        return out
    bad = set(spoofed["ipv4"] + spoofed["ipv6"])
    n_spoofed = sum(v for k, v in sent.items() if k in bad)
    print("%s: sent %s; host NICs saw %s; ToR ports saw %s; spoofed_drops %s -> %s" % (
        stack.mode, sent, at_nics, at_tor, drops0, drops1))
    assert n_spoofed == 8 * count and all(sent[own[f]] == count for f in own), sent
    for where, cap in (("host NICs", by_src(at_nics)), ("ToR ports", by_src(at_tor))):
        leaked = dict((k, v) for k, v in cap.items() if k in bad)
        assert leaked == {}, "%s %s: spoofed packets left the host: %s" % (stack.mode, where, leaked)
        for f in own:
            assert cap.get(own[f]) == count, "%s %s: legitimate %s from %s: %s of %d" % (
                stack.mode, where, f, own[f], cap.get(own[f]), count)
    assert drops1["mn-slot1"] - drops0["mn-slot1"] == n_spoofed, (drops0, drops1)
    assert drops1["mn-slot2"] == drops0["mn-slot2"], (drops0, drops1)
    for fam, p in pings.items():
        assert p.returncode == 0, "%s ping to storage from slot 1: %s" % (fam, p.stdout + p.stderr)
    assert lab.width(host) == {"ipv4": n, "ipv6": n}, "BGP sessions from the container addresses: %s" % lab.width(host)


# ---- removal (last) ----------------------------------------------------------------------------
def test_removal_restores_hosts(stack):
    """site_absent.yml: no unit, process, file, program, pin, namespace, route or address left; each
    host's dump equals the one taken before the first deploy; no task route on the ToRs."""
    lab = stack.lab
    for h in stack.hosts:   # the test's own tbf first (not part of the stack)
        lab.tbf(h, None)
    out = M.playbook("site_absent.yml", "--limit", ",".join(stack.tors + stack.hosts))
    rc = M.recap(out.stdout)
    assert all(v["failed"] == 0 for v in rc.values()), rc
    for h in stack.hosts:
        d = M.diff_dumps(stack.before[h], lab.dump(h))
        assert d == {}, "%s not restored: %s" % (h, dict((k, v) for k, v in d.items()))
    for tor in stack.tors:
        fib = lab.tor_fib(tor)
        task = [p for h in stack.hosts if lab.tor_of(h) == tor for s in lab.hosts[h]["slots"]
                for p in s["task_ip"].values() if p in fib]
        assert task == [], "%s still routes task IPs %s" % (tor, task)
