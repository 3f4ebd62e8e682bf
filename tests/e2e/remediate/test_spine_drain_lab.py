# -*- coding: utf-8 -*-
"""Spine drain and undrain on the live lab (issue 30 item 1): playbooks/drain.yml / undrain.yml with drain_scope=spine
on a two-spine fabric (tests/e2e/remediate/spine/fabric.yml: msd-spine1, msd-spine2, racks msd-r1 and msd-r2 with one
1-NIC host each; own names msd-*, runs beside other labs).

Observed, not assumed: each ToR's kernel FIB for the other rack's aggregates (both families) and its BGP paths
(`show bgp ... json`: the drained spine's path kept with local-preference 0, not selected), the running config and
the saved frr.conf of the spine, the marker, and traffic between the racks: 64 UDP flows (IPv4 and IPv6) from
msd-r1-h1 to msd-r2-h1, counted on both spines' ports to rack 1 (rx) and on the receiving host's NIC. The lab is
built and torn down by playbooks/lab.yml (every process by its recorded PID), also on failure. About a minute.
Run it under the lab lock: flock /work/lab.lock python -m pytest tests/e2e/remediate/test_spine_drain_lab.py
"""
import json
import os
import shutil
import subprocess
import time

import pytest
import yaml

from labkit.stack_lab import env, sh

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FABRIC = os.path.join(REPO, "tests", "e2e", "remediate", "spine", "fabric.yml")
STATE = "/run/netscale-multinic/lab/msd/state.json"
WORK = "/tmp/msd-spine-drain"
JOURNAL = os.path.join(WORK, "drain-journal")
VENV_BIN = os.path.join(REPO, ".venv", "bin")
S1, S2 = "msd-spine1", "msd-spine2"
TORS = ["msd-r1-tor", "msd-r2-tor"]
SRC, DST = "msd-r1-h1", "msd-r2-h1"
HALF = json.dumps({"drain_budget": {"max_zone_spine_share": 0.5}})   # 1 of 2 spines: over the 0.25 default
FLOWS, PER_FLOW = 32, 10


def playbook(name, *args, check=True, inventory=True):
    argv = [os.path.join(VENV_BIN, "ansible-playbook")] + (["-i", FABRIC] if inventory else [])
    argv += [os.path.join(REPO, "playbooks", name)] + list(args)
    p = subprocess.run(argv, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=600, check=False)
    if os.path.isdir(WORK):
        with open(os.path.join(WORK, "%s-%d.log" % (name[:-4], int(time.time() * 1000))), "w") as f:
            f.write(" ".join(argv) + "\n" + p.stdout + "\n" + p.stderr)
    if check and p.returncode != 0:
        raise AssertionError("ansible-playbook %s %s failed rc=%d\n%s\n%s" % (
            name, " ".join(args), p.returncode, p.stdout[-6000:], p.stderr[-2000:]))
    return p


def adhoc(host, module, args):
    p = subprocess.run([os.path.join(VENV_BIN, "ansible"), "-i", FABRIC, host, "-m", module, "-a", json.dumps(args)],
                       cwd=REPO, env=dict(env(), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                                          ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=False)
    try:
        return json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"][host]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible %s -m %s: rc=%d %s %s" % (
            host, module, p.returncode, p.stdout[-2000:], p.stderr[-1000:]))


def recap(stdout):
    out, on = {}, False
    for line in stdout.splitlines():
        if line.startswith("PLAY RECAP"):
            on = True
        elif on and ":" in line and "ok=" in line:
            host, rest = line.split(":", 1)
            out[host.strip()] = dict((k, int(v)) for k, v in (kv.split("=") for kv in rest.split()))
    return out


def lab_down():
    return playbook("lab.yml", "-e", "lab_topology=%s" % FABRIC, "-e", "lab_state=absent", inventory=False)


def drain(name, *extra, check=True):
    return playbook(name, "-e", "drain_journal_dir=%s" % JOURNAL, "-e", "drain_scope=spine", *extra, check=check)


def journal():
    with open(os.path.join(JOURNAL, "msd", "drain-journal.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


class Lab(object):
    def __init__(self):
        import sys
        sys.path.insert(0, os.path.join(REPO, ".build"))
        from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
        from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
        with open(FABRIC) as f:
            topo = load_topology(yaml.safe_load(f), FABRIC)
        plan = FabricPlan(topo).allocate()
        self.racks = dict((r.name, plan.rack_data(r)) for r in topo.racks)
        self.hosts = dict((h["name"], h) for r in self.racks.values() for h in r["hosts"])

    @staticmethod
    def pid(node):
        with open(STATE) as f:
            return json.load(f)["nodes"][node]["pid"]

    def x(self, node, argv, check=True):
        return sh(["nsenter", "-t", str(self.pid(node)), "-m", "-u", "-n", "--"] + argv, check=check)

    def vtysh_json(self, node, cmd):
        return json.loads(self.x(node, ["vtysh", "-c", cmd]).stdout or "{}")

    def other_aggregates(self, tor):
        return [(fam, r["prefix"][fam]) for r in self.racks.values() if r["tor"]["name"] != tor
                for fam in ("ipv4", "ipv6")]

    def fib(self, tor):
        """{aggregate: set(ToR port)} of the other racks' aggregates in the ToR's kernel FIB."""
        out = {}
        for fam, prefix in self.other_aggregates(tor):
            routes = json.loads(sh(["ip", "-n", "mnl-" + tor, "-4" if fam == "ipv4" else "-6", "-j", "route", "show",
                                    prefix]).stdout or "[]")
            ports = set()
            for r in routes:
                for n in r.get("nexthops") or [{"dev": r.get("dev")}]:
                    if "dead" not in n.get("flags", []) and "linkdown" not in n.get("flags", []):
                        ports.add(n.get("dev"))
            out[prefix] = ports
        return out

    def bgp(self, tor):
        """{aggregate: {spine hostname: (selected, locPrf)}} from the ToR's `show bgp <af> unicast <prefix> json`."""
        out = {}
        for fam, prefix in self.other_aggregates(tor):
            d = self.vtysh_json(tor, "show bgp %s unicast %s json" % (fam, prefix))
            out[prefix] = dict((p["peer"]["hostname"], (bool((p.get("bestpath") or {}).get("overall")
                                                             or p.get("multipath")), p.get("locPrf", 100)))
                               for p in d.get("paths", []))
        return out

    def rx(self, node, dev):
        link = json.loads(sh(["ip", "-n", "mnl-" + node, "-s", "-j", "link", "show", "dev", dev]).stdout)[0]
        return link["stats64"]["rx"]["packets"]

    def traffic(self):
        """Packets of FLOWS UDP flows per family (PER_FLOW each, distinct source ports) from SRC to DST, counted at
        both spines' ports to rack 1 (rx) and at DST's NIC. Returns {S1: n, S2: n, 'dst': n, 'sent': n}."""
        names = [(S1, "down-r1"), (S2, "down-r1"), (DST, "eth0")]
        before = dict((n, self.rx(n, d)) for n, d in names)
        script = ("import socket,sys\n"
                  "for fam,dst in ((socket.AF_INET,sys.argv[1]),(socket.AF_INET6,sys.argv[2])):\n"
                  "  for i in range(%d):\n"
                  "    s=socket.socket(fam,socket.SOCK_DGRAM); s.bind(('',41000+i))\n"
                  "    for k in range(%d): s.sendto(b'x'*64,(dst,9))\n"
                  "    s.close()\n" % (FLOWS, PER_FLOW))
        a = self.hosts[DST]["nics"][0]["address"]
        sh(["nsenter", "-t", str(self.pid(SRC)), "-n", "--", "python3", "-c", script, a["ipv4"], a["ipv6"]])
        time.sleep(0.5)
        after = dict((n, self.rx(n, d)) for n, d in names)
        return {S1: after[S1] - before[S1], S2: after[S2] - before[S2], "dst": after[DST] - before[DST],
                "sent": 2 * FLOWS * PER_FLOW}

    def running(self, spine):
        return self.x(spine, ["vtysh", "-c", "show running-config"]).stdout

    def saved(self, spine):
        return self.x(spine, ["cat", "/etc/frr/frr.conf"]).stdout

    def marker(self, spine):
        p = self.x(spine, ["cat", "/etc/frr/netscale-drain.json"], check=False)
        return json.loads(p.stdout) if p.returncode == 0 else None

    def wait(self, pred, what, timeout=20.0):
        t_end = time.monotonic() + timeout
        while True:
            got = pred()
            if got:
                return got
            if time.monotonic() > t_end:
                raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
            time.sleep(0.2)


@pytest.fixture(scope="module")
def lab():
    if os.geteuid() != 0:
        pytest.fail("spine drain lab tests need root (namespaces, FRR)")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    try:
        lab_down()
        t0 = time.monotonic()
        playbook("lab.yml", "-e", "lab_topology=%s" % FABRIC, "-e", "lab_monitoring=false")
        lab = Lab()
        for tor in TORS:   # both spines' sessions up and both in every aggregate's ECMP
            lab.wait(lambda: all(v == {"up-s1", "up-s2"} for v in lab.fib(tor).values()), "ECMP on %s" % tor, 30)
        print("lab built and converged in %.1f s" % (time.monotonic() - t0))
        yield lab
    finally:
        lab_down()
        shutil.rmtree(JOURNAL, ignore_errors=True)


def test_before_both_spines_carry_the_traffic_between_the_racks(lab):
    t = lab.traffic()
    print("before the drain: %s" % t)
    assert t["dst"] >= t["sent"], t
    for s in (S1, S2):   # 64 flows hashed over two spines: each gets a fair part
        assert t[s] >= 0.2 * t["sent"], t


def test_drain_spine1_moves_traffic_to_spine2(lab):
    check = drain("drain.yml", "-e", "drain_spine=%s" % S1, "-e", HALF, "--check", "--diff")
    assert recap(check.stdout)[S1]["changed"] == 1 and "+  bgp graceful-shutdown" in check.stdout
    assert "graceful-shutdown" not in lab.running(S1) and lab.marker(S1) is None, "check mode changed the spine"
    assert all(v == {"up-s1", "up-s2"} for tor in TORS for v in lab.fib(tor).values())
    t0 = time.monotonic()
    run = drain("drain.yml", "-e", "drain_spine=%s" % S1, "-e", HALF, "-e", "drain_reason=e2e")
    took = time.monotonic() - t0
    assert recap(run.stdout)[S1]["changed"] == 1
    assert " bgp graceful-shutdown" in lab.running(S1) and " bgp graceful-shutdown" in lab.saved(S1)
    assert lab.marker(S1)["drained"] is True and lab.marker(S1)["reason"] == "e2e"
    for tor in TORS:
        fib, bgp = lab.fib(tor), lab.bgp(tor)
        print("%s after the drain: FIB %s, BGP %s" % (tor, fib, bgp))
        assert fib and all(v == {"up-s2"} for v in fib.values()), (tor, fib)
        for prefix, paths in bgp.items():   # spine1's path kept as last resort: local-pref 0, not selected
            assert paths[S1] == (False, 0) and paths[S2][0] is True, (tor, prefix, paths)
    t = lab.traffic()
    print("drain.yml %.1f s; traffic with %s drained: %s" % (took, S1, t))
    assert t["dst"] >= t["sent"], t
    assert t[S2] >= t["sent"] and t[S1] <= 10, t   # only BGP keepalives left on spine1's port
    rec = [r for r in journal() if r["type"] == "decision"][-1]
    assert rec["allowed"] and rec["element"] == "spine:%s" % S1
    assert rec["numbers"]["spine_coverage.carriers"] == {
        "msd-r1-tor": {lab.racks["msd-r2"]["prefix"][f]: [S2] for f in ("ipv4", "ipv6")},
        "msd-r2-tor": {lab.racks["msd-r1"]["prefix"][f]: [S2] for f in ("ipv4", "ipv6")}}
    again = drain("drain.yml", "-e", "drain_spine=%s" % S1, "-e", HALF)
    rc = recap(again.stdout)
    assert rc[S1]["changed"] == 0 and rc["localhost"]["changed"] == 0, rc
    assert "already drained, nothing to change" in again.stdout


def test_draining_the_second_spine_is_refused_nothing_changed(lab):
    before = (lab.running(S2), lab.marker(S2), dict((t, lab.fib(t)) for t in TORS), len(journal()))
    refused = drain("drain.yml", "-e", "drain_spine=%s" % S2, "-e", HALF, check=False)
    assert refused.returncode != 0
    out = refused.stdout
    assert "drain spine:%s: REFUSED by the blast-radius budget: at most 0.5 of a zone's spines out at once, never the " \
        "last: zone msd-az1 has 2 spines, 1 drained now, 2 after this drain (1.00)" % S2 in out, out[-3000:]
    assert "the other spines must carry every rack aggregate first: msd-r1-tor: rack msd-r2's aggregate" in out
    assert "Nothing was changed; the refusal is journaled" in out
    assert S2 not in recap(out), "the refused run reached the spine"
    after = (lab.running(S2), lab.marker(S2), dict((t, lab.fib(t)) for t in TORS), len(journal()))
    assert after[:3] == before[:3] and after[3] == before[3] + 1
    rec = journal()[-1]
    assert rec["element"] == "spine:%s" % S2 and rec["allowed"] is False and len(rec["reasons"]) == 2


def test_drain_survives_a_bgpd_restart_and_a_redeploy_of_the_spine(lab):
    res = adhoc("localhost", "netscale.multinic.lab_daemon",
                {"topology": FABRIC, "node": S1, "daemon": "bgpd", "action": "restart"})
    assert res.get("changed") and not res.get("failed"), res
    # sessions back (spine1's paths present again on both ToRs), still with local-pref 0 and out of the FIB
    for tor in TORS:
        lab.wait(lambda: all(S1 in p for p in lab.bgp(tor).values()), "%s's paths back on %s" % (S1, tor), 30)
        assert all(p[S1] == (False, 0) for p in lab.bgp(tor).values()), lab.bgp(tor)
        assert all(v == {"up-s2"} for v in lab.fib(tor).values()), lab.fib(tor)
    # a re-deploy of the spine's config without the drain (what a render of the spine pushes): frr_config keeps it
    plain = "\n".join(line for line in lab.running(S1).split("\n")
                      if line.strip() not in ("bgp graceful-shutdown", "Building configuration...",
                                              "Current configuration:", "end"))
    res = adhoc(S1, "netscale.multinic.frr_config", {"content": plain})
    assert not res.get("failed") and res["drain_kept"] is True and res["changed"] is False, res
    assert " bgp graceful-shutdown" in lab.running(S1)
    for tor in TORS:
        assert all(v == {"up-s2"} for v in lab.fib(tor).values()), lab.fib(tor)


def test_undrain_brings_spine1_back_into_the_ecmp(lab):
    run = drain("undrain.yml", "-e", "drain_spine=%s" % S1)
    assert recap(run.stdout)[S1]["changed"] == 1
    assert "graceful-shutdown" not in lab.running(S1) and "graceful-shutdown" not in lab.saved(S1)
    assert lab.marker(S1) is None
    for tor in TORS:
        fib, bgp = lab.fib(tor), lab.bgp(tor)
        assert fib and all(v == {"up-s1", "up-s2"} for v in fib.values()), (tor, fib)
        assert all(p[S1] == (True, 100) and p[S2] == (True, 100) for p in bgp.values()), (tor, bgp)
    t = lab.traffic()
    print("undrained: traffic %s" % t)
    assert t["dst"] >= t["sent"], t
    for s in (S1, S2):
        assert t[s] >= 0.2 * t["sent"], t
    assert journal()[-1]["type"] == "outcome" and journal()[-1]["ok"] is True
    again = drain("undrain.yml", "-e", "drain_spine=%s" % S1)
    rc = recap(again.stdout)
    assert rc[S1]["changed"] == 0 and rc["localhost"]["changed"] == 0, rc
