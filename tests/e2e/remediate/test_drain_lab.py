# -*- coding: utf-8 -*-
"""Drain and undrain of a NIC on the live lab (issue 30 items 1-2): playbooks/drain.yml / undrain.yml on the stack
lab's rack 1 (tests/e2e/stack/fabric.yml: mns-r1-h1 with 2 NICs, mns-r1-h2 with 4, ToR mns-r1-tor), eBPF mode.

Observed, not assumed: the ToR's FIB (kernel routes and `vtysh show ip route json`), the watcher's published egress
state, the host's NIC byte counters under 32 iperf3 flows each way, the playbook recap, the host's marker file.
One lab for the module (about 3 minutes); torn down by playbooks/lab.yml, also on failure. Run it under the lab
lock: flock /work/lab.lock python -m pytest tests/e2e/remediate
"""
import json
import os
import shutil
import signal
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from labkit import eda_rulebook
from labkit import stack_lab as M

HOST = "mns-r1-h2"      # 4 NICs
SMALL = "mns-r1-h1"     # 2 NICs
HOSTS = [SMALL, HOST]
TORS = ["mns-r1-tor"]
MARKER = "/var/lib/netscale-multinic/admin-drain.json"
EGRESS = "/run/netscale-multinic/egress-state.json"
FLOWS = 32


@pytest.fixture(scope="module")
def lab():
    if os.geteuid() != 0:
        pytest.fail("drain lab tests need root (lab: namespaces, FRR, systemd hosts)")
    os.makedirs(M.WORK, exist_ok=True)
    lab = None
    try:
        M.lab_teardown()
        M.lab_build()
        lab = M.Lab()
        M.site("--limit", ",".join(TORS + HOSTS))
        for h in HOSTS:
            lab.tbf(h, "200mbit")
        for h in HOSTS:
            lab.wait_width(h, len(lab.nics(h)), timeout=60)
        yield lab
    finally:
        if lab is not None:
            lab.close()
        M.lab_teardown()
        shutil.rmtree(JOURNAL, ignore_errors=True)


JOURNAL = os.path.join(M.WORK, "drain-journal")


def drain(name, *extra, check=True):
    if name == "undrain.yml" and not any("drain_clean_window" in str(x) for x in extra):
        # the drain/undrain tests of items 1-2 undrain at once, by hand: the operator's consent to skip the clean
        # probe window of item 4 (its own tests below pass drain_clean_window)
        extra = ("-e", "drain_undrain_without_clean_window=true") + tuple(extra)
    return M.playbook(name, "-e", "drain_journal_dir=%s" % JOURNAL, *extra, check=check)


def nic_args(host, nic):
    return ("-e", "drain_scope=nic", "-e", "drain_host=%s" % host, "-e", "drain_nic=%d" % nic)


def next_hops(lab, host):
    """{family: set of next-hop addresses} of slot 1's task IP in the ToR's FIB, from the kernel and from vtysh."""
    tor = lab.tor_of(host)
    kern = dict((fam, set(x.split("@")[0] for x in lab.tor_fib(tor).get(lab.task_ip(host, fam).split("/")[0], ())))
                for fam in ("ipv4", "ipv6"))
    frr = {}
    for fam, cmd in (("ipv4", "show ip route %s/32 json"), ("ipv6", "show ipv6 route %s/128 json")):
        ip = lab.task_ip(host, fam).split("/")[0]
        data = json.loads(lab.x(tor, ["vtysh", "-c", cmd % ip]).stdout or "{}")
        hops = set()
        for route in data.get("%s/%s" % (ip, 32 if fam == "ipv4" else 128), []):
            if route.get("selected"):
                hops.update(n.get("ip") for n in route.get("nexthops", []) if n.get("active") and n.get("fib"))
        frr[fam] = hops
    return kern, frr


def nic_hops(lab, host, k):
    """The next hops of slot 1's task IP via NIC k: the slot's container addresses on NIC k (either family: an
    IPv4 route may have an IPv6 next hop)."""
    nic = lab.hosts[host]["slots"][0]["nics"][k]["address"]
    return {nic["ipv4"], nic["ipv6"]}


def egress_state(lab, host):
    return json.loads(lab.x(host, ["cat", EGRESS]).stdout)


def marker(lab, host):
    p = lab.x(host, ["cat", MARKER], check=False)
    return p.stdout if p.returncode == 0 else None


def shares_both_ways(lab, host, port):
    out = {}
    for label, fam, reverse in (("egress", "ipv6", False), ("ingress", "ipv4", True)):
        dummy, sh, total = lab.iperf(host, fam, port + int(reverse), flows=FLOWS, seconds=4, reverse=reverse,
                                     interval=1.0)
        assert total > 0
        out[label] = dict((k, round(v, 3)) for k, v in sorted(sh.items()))
    return out


def test_drain_nic_takes_it_out_of_tor_ecmp_and_egress_and_traffic_moves(lab):
    n = len(lab.nics(HOST))
    gone = nic_hops(lab, HOST, 1)
    kern, frr = next_hops(lab, HOST)
    for fam in ("ipv4", "ipv6"):   # before: NIC 1 is one of the n next hops, in the kernel and in FRR
        assert len(kern[fam]) == n and kern[fam] & gone and len(frr[fam]) == n and frr[fam] & gone, (fam, kern, frr)
    check = drain("drain.yml", *nic_args(HOST, 1), "--check", "--diff")
    assert M.recap(check.stdout)[HOST]["changed"] == 1 and marker(lab, HOST) is None, "check mode changed the host"
    t0 = time.monotonic()
    run = drain("drain.yml", *nic_args(HOST, 1), "-e", "drain_reason=e2e")
    took = time.monotonic() - t0
    assert M.recap(run.stdout)[HOST]["changed"] == 1
    kern, frr = next_hops(lab, HOST)
    for fam in ("ipv4", "ipv6"):
        assert len(kern[fam]) == n - 1 and not kern[fam] & gone, (fam, kern)
        assert len(frr[fam]) == n - 1 and not frr[fam] & gone, (fam, frr)
    st = egress_state(lab, HOST)
    assert st["out"] == [1] and st["drained"] == [1], st
    sh = shares_both_ways(lab, HOST, 5401)
    print("drain.yml %.1f s; ToR next hops %s; egress state %s; shares with eth1 drained %s" % (took, kern, st, sh))
    for label, s in sh.items():
        assert s["eth1"] <= 0.01, "%s: eth1 still carries %.3f of the bytes (%s)" % (label, s["eth1"], s)
        for nic in ("eth0", "eth2", "eth3"):
            assert abs(s[nic] - 1.0 / 3) <= 0.07, "%s: %s share %.3f, want 1/3 +- 0.07 (%s)" % (label, nic, s[nic], s)
    again = drain("drain.yml", *nic_args(HOST, 1))
    rc = M.recap(again.stdout)
    assert rc[HOST]["changed"] == 0 and rc["localhost"]["changed"] == 0, rc
    assert "already drained, nothing to change" in again.stdout


def test_watcher_restart_keeps_the_nic_drained(lab):
    """Continues from the drain above: the watcher restarted (and the sidecar of slot 1 restarted) while eth1 is
    drained; sampled every 50 ms for 6 s, the ToR never has eth1 back and the egress state says drained again."""
    assert egress_state(lab, HOST).get("drained") == [1]
    gone = nic_hops(lab, HOST, 1)
    lab.x(HOST, ["systemctl", "restart", "netscale-multinic-watcher.service"])
    lab.x(HOST, ["systemctl", "restart", "netscale-vipinjector@1.service"])
    seen = set()
    t_end = time.monotonic() + 6.0
    while time.monotonic() < t_end:
        fib = lab.tor_fib(lab.tor_of(HOST))
        for fam in ("ipv4", "ipv6"):
            seen.update(x.split("@")[0] for x in fib.get(lab.task_ip(HOST, fam).split("/")[0], ()))
        time.sleep(0.05)
    assert seen and not seen & gone, "eth1 came back on the ToR (or no next hop seen): %s" % seen
    lab.wait_width(HOST, len(lab.nics(HOST)) - 1, timeout=20)   # the restarted sidecar announces on the others
    st = egress_state(lab, HOST)
    assert st["drained"] == [1] and st["out"] == [1], st
    pid = lab.x(HOST, ["systemctl", "show", "-p", "MainPID", "--value", "netscale-multinic-watcher.service"]).stdout
    log = lab.x(HOST, ["journalctl", "-u", "netscale-multinic-watcher.service", "_PID=%s" % pid.strip(), "--no-pager"],
                check=False).stdout
    print("after the restarts: egress state %s; watcher log: %s" % (
        st, [x for x in log.splitlines() if "admin" in x or "egress set" in x][:4]))


def test_undrain_brings_it_back(lab):
    n = len(lab.nics(HOST))
    run = drain("undrain.yml", *nic_args(HOST, 1))
    assert M.recap(run.stdout)[HOST]["changed"] == 1
    kern, frr = next_hops(lab, HOST)
    gone = nic_hops(lab, HOST, 1)
    for fam in ("ipv4", "ipv6"):
        assert len(kern[fam]) == n and kern[fam] & gone and len(frr[fam]) == n and frr[fam] & gone, (fam, kern, frr)
    assert marker(lab, HOST) is None
    st = egress_state(lab, HOST)
    assert st["out"] == [] and "drained" not in st, st
    again = drain("undrain.yml", *nic_args(HOST, 1))
    assert M.recap(again.stdout)[HOST]["changed"] == 0
    sh = shares_both_ways(lab, HOST, 5411)
    print("undrained: shares %s" % sh)
    for label, s in sh.items():
        assert abs(s["eth1"] - 0.25) <= 0.07, "%s: eth1 share %.3f after the undrain (%s)" % (label, s["eth1"], s)


def test_last_nic_of_a_2nic_host_refused_nothing_changed(lab):
    budget = ("-e", json.dumps({"drain_budget": {"max_rack_nic_share": 0.5}}))
    drain("drain.yml", *nic_args(SMALL, 0), *budget)
    try:
        lab.wait_width(SMALL, 1, timeout=5)
        before = (marker(lab, SMALL), next_hops(lab, SMALL), lab.dump(SMALL))
        refused = drain("drain.yml", *nic_args(SMALL, 1), *budget, check=False)
        assert refused.returncode != 0
        assert "REFUSED by the blast-radius budget: never a host's last NIC: mns-r1-h1 has 2 NICs, 1 already drained " \
               "(0); draining NIC 1 would leave none in service" in refused.stdout, refused.stdout[-3000:]
        assert SMALL not in M.recap(refused.stdout), "the refused run reached the host"
        after = (marker(lab, SMALL), next_hops(lab, SMALL), lab.dump(SMALL))
        assert after[0] == before[0] and after[1] == before[1], (before[:2], after[:2])
        assert M.diff_dumps(before[2], after[2]) == {}
        with open(os.path.join(JOURNAL, "mns", "drain-journal.jsonl")) as f:
            last = [json.loads(x) for x in f.read().splitlines() if '"decision"' in x][-1]
        assert last["element"] == "nic:mns-r1-h1:1" and not last["allowed"], last
        print("refused and journaled: %s; numbers %s" % (last["reasons"], dict(
            (k, v) for k, v in last["numbers"].items() if k.startswith("last_nic"))))
    finally:
        drain("undrain.yml", *nic_args(SMALL, 0), check=False)
    lab.wait_width(SMALL, 2, timeout=20)


def test_host_drain_withdraws_every_slot_and_tells_the_scheduler(lab):
    """Scope host: every slot's task IPs leave the ToR's FIB (both slots, both families), the scheduler hook runs
    once with the host; undrain: every task IP back at full width, the hook told again."""
    hook = os.path.join(M.WORK, "scheduler-hook.txt")
    if os.path.exists(hook):
        os.unlink(hook)
    extra = ("-e", "drain_scope=host", "-e", "drain_host=%s" % HOST, "-e", json.dumps({
        "drain_budget": {"max_rack_nic_share": 1.0},
        "drain_scheduler_hook": ["sh", "-c", 'echo "$NETSCALE_DRAIN_ACTION $NETSCALE_DRAIN_HOSTS" >> %s' % hook]}))
    tor = lab.tor_of(HOST)
    tips = [s["task_ip"][fam] for s in lab.hosts[HOST]["slots"] for fam in ("ipv4", "ipv6")]
    try:
        run = drain("drain.yml", *extra)
        assert M.recap(run.stdout)[HOST]["changed"] == 1
        fib = lab.tor_fib(tor)
        assert all(not fib.get(t) for t in tips), dict((t, fib.get(t)) for t in tips)
        assert json.loads(marker(lab, HOST))["host"]["job"]
        with open(hook) as f:
            assert f.read() == "drain %s\n" % HOST
    finally:
        back = drain("undrain.yml", *extra, check=False)
    assert back.returncode == 0, back.stdout[-3000:]
    fib = lab.tor_fib(tor)
    widths = dict((t, len(fib.get(t, ()))) for t in tips)
    assert all(w == len(lab.nics(HOST)) for w in widths.values()), widths
    with open(hook) as f:
        assert f.read() == "drain %s\nundrain %s\n" % (HOST, HOST)
    os.unlink(hook)
    print("host drain: %d task routes withdrawn from %s and back at width %s; scheduler hook told twice" % (
        len(tips), tor, sorted(set(widths.values()))))


# ------------------------------------------------------------------------------------------------
# Undrain after a clean probe window (issue 30 item 4): the monitoring agents on the two hosts, the lab's
# Prometheus (lab_monitoring, started with the lab), a 30 s window judged in 5 s steps
# ------------------------------------------------------------------------------------------------
with open(os.path.join(M.HERE, "group_vars", "all", "monitoring.yml")) as _f:
    PROM = "http://127.0.0.1:%d" % yaml.safe_load(_f)["lab_monitoring_port"]   # the stack lab's own port block
CLEAN_WINDOW = 30
WINDOW_ARGS = ("-e", "drain_clean_window=%d" % CLEAN_WINDOW, "-e", "drain_prometheus_url=%s" % PROM,
               "-e", "drain_prometheus_timeout=5",
               "-e", json.dumps({"drain_clean_window_settings": {"step": 5, "max_gap": 15}}))


def prom_query(expr):
    u = "%s/api/v1/query?%s" % (PROM, urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(u, timeout=5) as r:
        return json.loads(r.read().decode())["data"]["result"]


def prometheus_pid():
    with open(M.STATE) as f:
        st = json.load(f)
    procs = [x for x in st["resources"] if x.get("type") == "process" and x.get("name") == "monitoring/prometheus"]
    assert len(procs) == 1, "the lab's Prometheus is not in %s" % M.STATE
    return int(procs[0]["pid"])


@pytest.fixture(scope="module")
def agents(lab):
    """The fabric_monitor agents on the lab hosts (playbooks/monitor.yml), removed afterwards."""
    try:
        M.playbook("monitor.yml", "--limit", ",".join(HOSTS))
        deadline = time.time() + 90
        expr = 'fabric_monitor_probes_answered_total{host="%s",nic="eth1"}' % HOST
        while not prom_query(expr):
            assert time.time() < deadline, "no probe counters of %s eth1 in the lab's Prometheus after 90 s" % HOST
            time.sleep(3)
        yield
    finally:
        M.playbook("monitor.yml", "--limit", ",".join(HOSTS), "-e", "fabric_monitor_state=absent", check=False)


def journal_decisions():
    with open(os.path.join(JOURNAL, "mns", "drain-journal.jsonl")) as f:
        return [json.loads(x) for x in f.read().splitlines() if '"decision"' in x]


def still_drained(lab, before_hops):
    """Nothing changed: NIC 1's next hops still out of the ToR, the marker still names it, journaled out."""
    kern, frr = next_hops(lab, HOST)
    assert (kern, frr) == before_hops
    gone = nic_hops(lab, HOST, 1)
    assert not any(kern[f] & gone or frr[f] & gone for f in ("ipv4", "ipv6")), (kern, frr)
    assert "1" in json.loads(marker(lab, HOST))["nics"]


def test_undrain_only_after_a_clean_window(lab, agents):
    """Drain NIC 1, no fault: refused while the window has not elapsed, refused while Prometheus is stopped
    (SIGSTOP: it answers nothing), accepted once 30 s of probes after the drain (and after the outage) are clean;
    every verdict journaled with its undrain decision; probes ran on the drained NIC all along."""
    n = len(lab.nics(HOST))
    t0 = time.time()
    drain("drain.yml", *nic_args(HOST, 1))
    lab.wait_width(HOST, n - 1, timeout=20)
    hops = next_hops(lab, HOST)
    # 1. at once: the window after the drain has not elapsed
    early = drain("undrain.yml", *nic_args(HOST, 1), *WINDOW_ARGS, check=False)
    assert early.returncode != 0 and "REFUSED by the blast-radius budget: the probe window is not clean" in early.stdout
    assert "window not yet elapsed" in early.stdout, early.stdout[-3000:]
    assert HOST not in M.recap(early.stdout)
    still_drained(lab, hops)
    last = journal_decisions()[-1]
    assert (last["action"], last["allowed"], last["window"]["verdict"]) == ("undrain", False, "no_evidence"), last
    # the drained NIC still carries probes (answered, none lost)
    time.sleep(max(0.0, t0 + CLEAN_WINDOW + 8 - time.time()))
    sel = 'host="%s",nic="eth1"' % HOST
    answered = sum(float(r["value"][1]) for r in prom_query("increase(fabric_monitor_probes_answered_total{%s}[20s])" % sel))
    lost = sum(float(r["value"][1]) for r in prom_query("increase(fabric_monitor_probes_lost_total{%s}[20s])" % sel))
    print("drained eth1 over 20 s: %.0f probes answered, %.0f lost" % (answered, lost))
    assert answered > 0 and lost == 0
    # 2. Prometheus stopped: no evidence, refused, nothing changed
    pid = prometheus_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        t_stop = time.time()
        down = drain("undrain.yml", *nic_args(HOST, 1), *WINDOW_ARGS, check=False)
    finally:
        os.kill(pid, signal.SIGCONT)
    t_cont = time.time()
    assert down.returncode != 0 and "could not be read" in down.stdout, down.stdout[-3000:]
    assert HOST not in M.recap(down.stdout)
    still_drained(lab, hops)
    last = journal_decisions()[-1]
    assert (last["allowed"], last["window"]["verdict"]) == (False, "no_evidence"), last
    print("Prometheus stopped %.1f s: refused (%s)" % (t_cont - t_stop, last["window"]["reasons"][0][:160]))
    # 3. a clean window after the outage: accepted, journaled, NIC 1 back on the ToR
    time.sleep(max(0.0, t_cont + CLEAN_WINDOW + 10 - time.time()))
    t_undrain = time.time()
    ok = drain("undrain.yml", *nic_args(HOST, 1), *WINDOW_ARGS, check=False)
    assert ok.returncode == 0, ok.stdout[-4000:]
    assert M.recap(ok.stdout)[HOST]["changed"] == 1
    kern, frr = next_hops(lab, HOST)
    gone = nic_hops(lab, HOST, 1)
    for fam in ("ipv4", "ipv6"):
        assert len(kern[fam]) == n and kern[fam] & gone and len(frr[fam]) == n and frr[fam] & gone, (fam, kern, frr)
    assert marker(lab, HOST) is None
    last = journal_decisions()[-1]
    assert (last["action"], last["allowed"], last["window"]["verdict"]) == ("undrain", True, "clean"), last
    fig = last["window"]["nics"]["eth1"]
    assert fig["lost"] == 0 and fig["resolved"] >= 10 and fig["gap_count"] == 0
    with open(os.path.join(JOURNAL, "mns", "drain-journal.jsonl")) as f:
        tail = json.loads(f.read().splitlines()[-1])
    assert (tail["type"], tail["action"], tail["ok"]) == ("outcome", "undrain", True)
    print("clean window accepted %.0f s after the drain: %s; undrain.yml %.1f s" % (
        t_undrain - t0, last["window"]["summary"], time.time() - t_undrain))


# ------------------------------------------------------------------------------------------------
# One automatic drain/undrain cycle and a budget refusal (issue 30: "CI runs one automatic drain/undrain cycle and
# the budget refusal"): the real ansible-rulebook in mode auto reads case events from its case file and starts the
# real drain.yml and undrain.yml on this lab, with the fabric's drain journal under its report root. The cases are
# written to the file by the test (the correlator's output format): the correlator itself on the lab is tested in
# tests/e2e/monitor, the whole chain from a real fault under load is bench/remediation_lab_chain.py.
# ------------------------------------------------------------------------------------------------
AUTO_WINDOW = 30


@pytest.fixture(scope="module")
def auto_rulebook(lab, agents, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("eda-lab"))
    inv = os.path.join(work, "inventory-src")
    os.makedirs(inv)
    shutil.copy(M.TOPOLOGY, os.path.join(inv, "fabric.yml"))
    shutil.copytree(os.path.join(M.HERE, "group_vars"), os.path.join(inv, "group_vars"))
    # the lab's tuning of the clean window, as an operator sets it: inventory variables (the rulebook passes only
    # drain_clean_window)
    with open(os.path.join(inv, "group_vars", "all", "remediation.yml"), "w") as f:
        yaml.safe_dump({"drain_clean_window_settings": {"step": 5, "max_gap": 15}, "drain_prometheus_timeout": 5}, f)
    variables = {"netscale_eda_mode": "auto", "netscale_eda_snapshot": False,
                 "netscale_eda_clean_window": AUTO_WINDOW,
                 "netscale_eda_drain_playbook": os.path.join(M.REPO, "playbooks", "drain.yml"),
                 "netscale_eda_undrain_playbook": os.path.join(M.REPO, "playbooks", "undrain.yml"),
                 "netscale_eda_undrain_retry": {"interval": 10, "attempts": 6}}
    yield from eda_rulebook.start(os.path.join(work, "rb"), variables, inventory_dir=inv)


def auto_journal(rb):
    path = os.path.join(rb.reports, "drain", "mns", "drain-journal.jsonl")
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def test_rulebook_drains_a_nic_refuses_one_over_budget_and_undrains_after_the_clean_window(lab, auto_rulebook):
    """Mode auto, the real playbooks: a case of NIC 1 of the 4-NIC host drains it (out of the ToR's ECMP in the
    kernel and in FRR, marker on the host, an automatic decision in the fabric's drain journal); a case of NIC 0 of
    the 2-NIC host in the same rack is refused by the budget (2 of the rack's 6 NICs out would pass 25 %): the run
    is recorded failed, nothing changed on that host or the ToR; the first case's close starts undrain.yml, which
    lets NIC 1 back only once its probes have been clean for the window: back in the ToR's ECMP, marker gone."""
    rb = auto_rulebook
    n = len(lab.nics(HOST))
    case, over = "mns-auto-nic@1", "mns-auto-over@2"
    t0 = time.time()
    rb.write(eda_rulebook.case_line(case, host=HOST, nic=1, zone="mns-az1", tor="mns-r1-tor"))
    rb.wait(lambda: [r["status"] for r in rb.runs(case)] == ["started", "succeeded"], "the automatic drain", 240)
    lab.wait_width(HOST, n - 1, timeout=20)
    t_drained = time.time()
    kern, frr = next_hops(lab, HOST)
    gone = nic_hops(lab, HOST, 1)
    assert not any(kern[f] & gone or frr[f] & gone for f in ("ipv4", "ipv6")), (kern, frr)
    assert "1" in json.loads(marker(lab, HOST))["nics"]
    first = [r for r in auto_journal(rb) if r["type"] == "decision"]
    assert [(r["action"], r["element"], r["allowed"], r.get("case"), r.get("automatic")) for r in first] == [
        ("drain", "nic:%s:1" % HOST, True, case, True)], first
    print("automatic drain of %s NIC 1: %.1f s from the case line to the ToR at width %d" % (
        HOST, t_drained - t0, n - 1))
    # over the rack's budget: refused by drain.yml's budget, the run failed, nothing changed
    before = (marker(lab, SMALL), next_hops(lab, SMALL), lab.dump(SMALL))
    rb.write(eda_rulebook.case_line(over, host=SMALL, nic=0, zone="mns-az1", tor="mns-r1-tor"))
    rb.wait(lambda: [r["status"] for r in rb.runs(over)] == ["started", "failed"], "the refused drain", 240)
    after = (marker(lab, SMALL), next_hops(lab, SMALL), lab.dump(SMALL))
    assert after[0] is None and after[:2] == before[:2], (before[:2], after[:2])
    assert M.diff_dumps(before[2], after[2]) == {}
    refused = [r for r in auto_journal(rb) if r["type"] == "decision" and r.get("case") == over]
    assert [(r["action"], r["element"], r["allowed"]) for r in refused] == [("drain", "nic:%s:0" % SMALL, False)], \
        refused
    assert refused[0]["reasons"] == ["at most 0.25 of a rack's NICs out at once: rack mns-r1 has 6 NICs, 1 out now, 2 "
                                     "after this drain (0.33)"], refused[0]
    assert (eda_rulebook.actions.request_id(over), over) in eda_rulebook.eda_journal.summary(rb.journal())["failed"]
    # the case closes: undrain.yml with the clean window, retried while the window after the drain is not clean yet
    rb.write(eda_rulebook.case_line(case, host=HOST, nic=1, zone="mns-az1", tor="mns-r1-tor", state="closed"))
    rb.wait(lambda: (rb.undrain_runs(case)[-1:] or [{}])[0].get("status") == "succeeded", "the automatic undrain",
            AUTO_WINDOW + 240)
    lab.wait_width(HOST, n, timeout=20)
    t_back = time.time()
    kern, frr = next_hops(lab, HOST)
    for fam in ("ipv4", "ipv6"):
        assert len(kern[fam]) == n and kern[fam] & gone and len(frr[fam]) == n and frr[fam] & gone, (fam, kern, frr)
    assert marker(lab, HOST) is None
    last = [r for r in auto_journal(rb) if r["type"] == "decision" and r.get("case") == case][-1]
    assert (last["action"], last["allowed"], last["window"]["verdict"]) == ("undrain", True, "clean"), last
    fig = last["window"]["nics"]["eth1"]
    assert fig["lost"] == 0 and fig["resolved"] >= 5 and fig["gap_count"] == 0, fig
    print("automatic undrain: %.1f s after the drain (window %d s; undrain runs %s)" % (
        t_back - t_drained, AUTO_WINDOW, [r["status"] for r in rb.undrain_runs(case)]))
