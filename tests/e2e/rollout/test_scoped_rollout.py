# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change-scoped rollout on a live lab (issue 16 item 2): a fabric of two racks with one 2-NIC host each
(own names ``mnsc``, runs beside other labs) is deployed by the rollout; the topology then grows by one
host in rack 1 and a rack 3 with one host (the lab follows in place); ``rollout_scope=changed`` deploys the
two new hosts through canary, waves and every gate, configures only the ToRs whose rendered config changed
(rack 1, rack 3) and leaves everything else alone:

- the pre-existing hosts are in no play (the recap names them nowhere) and their state dumps (addresses,
  routes of all tables, rules, proxy entries of the host and its slot namespaces, tc, nftables, the datapath
  record, the sidecars' PIDs) and lab PIDs are byte-identical before and after;
- the untouched rack's ToR reports 0 changed, keeps its running config byte for byte, its FRR PIDs, and
  its BGP table but for the new rack's aggregate the spine now announces;
- the new hosts pass every gate (BGP sessions established, ECMP width = NIC count); the report lists the
  untouched hosts and ToR as unchanged.

Then a second scoped rollout of the same topology scopes to nothing and says so. Needs root; fails
(never skips) without. Run under the lab lock: flock /tmp/netscale-e2e.lock pytest ...
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import time

import pytest
import yaml

from labkit import stack_lab   # the lab's command runner
from labkit.lab_vars import link_group_vars

pytestmark = pytest.mark.e2e
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VENV_BIN = os.path.join(REPO, ".venv", "bin")
FABRIC = "mnsc"
STATE = "/run/netscale-multinic/lab/%s/state.json" % FABRIC
# beside the other lane's and the 'beside' group's labs in CI (scripts/ci_groups.py): its own monitoring port block
MONITORING_PORT = 19690

BASE = {
    "plugin": "netscale.multinic.fabric",
    "name": FABRIC,
    "region": {"name": FABRIC, "id": 1},
    "capacity": {"buildings": 1, "zones": 1, "racks": 4, "hosts": 4, "nics": 8, "task_slots": 2, "spines": 2},
    "pools": {"ipv6": "fd00:10::/48", "ipv4": "198.18.0.0/16",
              "infrastructure": {"ipv6": "fd00:ff::/64", "ipv4": "198.19.0.0/24"}},
    "asn": {"spine": 4200000001, "tor": 4200001001, "host": 4201000001},
    "buildings": [{"id": 1, "name": FABRIC + "-b1", "zones": [{
        "id": 1, "name": FABRIC + "-az1", "spines": [{"id": 1, "name": FABRIC + "-spine1"}],
        "racks": [
            {"id": 1, "name": FABRIC + "-r1", "hosts": [{"id": 1, "name": FABRIC + "-r1-h1", "nics": 2, "task_slots": 1}]},
            {"id": 2, "name": FABRIC + "-r2", "hosts": [{"id": 1, "name": FABRIC + "-r2-h1", "nics": 2, "task_slots": 1}]},
        ]}]}],
    "lab": {"storage": {"name": FABRIC + "-storage", "ipv6": "fd00:5::/64", "ipv4": "198.19.5.0/24"}},
}
OLD_HOSTS = [FABRIC + "-r1-h1", FABRIC + "-r2-h1"]
NEW_HOSTS = [FABRIC + "-r1-h2", FABRIC + "-r3-h1"]
UNTOUCHED_TOR = FABRIC + "-r2-tor"
TIMES = {}   # phase -> seconds since the test started (printed at teardown, also after a failure)


def grown():
    data = copy.deepcopy(BASE)
    racks = data["buildings"][0]["zones"][0]["racks"]
    racks[0]["hosts"].append({"id": 2, "name": FABRIC + "-r1-h2", "nics": 2, "task_slots": 1})
    racks.append({"id": 3, "name": FABRIC + "-r3", "hosts": [{"id": 1, "name": FABRIC + "-r3-h1", "nics": 2,
                                                              "task_slots": 1}]})
    return data


def env():
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + ":" + e.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    e["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    e["ANSIBLE_NOCOLOR"] = "1"
    e["ANSIBLE_VAULT_PASSWORD_FILE"] = os.path.join(REPO, ".cache", "lab-vault-password")
    e.pop("NETSCALE_LAB_FAIL_AT", None)
    return e


def playbook(*args, check=True):
    p = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook")] + list(args), cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=900, check=False)
    if check and p.returncode != 0:
        raise AssertionError("ansible-playbook %s rc=%d\n%s\n%s" % (" ".join(args), p.returncode, p.stdout[-5000:],
                                                                    p.stderr[-2000:]))
    return p


def recaps(stdout):
    out = {}
    for line in stdout.split("PLAY RECAP", 1)[-1].splitlines():
        if "ok=" in line and ":" in line:
            name, rest = line.split(":", 1)
            out[name.strip()] = dict(kv.split("=") for kv in rest.split())
    return out


def sh(argv):
    return stack_lab.sh(argv, timeout=None).stdout


def in_node(pid, *argv):
    return sh(["nsenter", "-t", str(pid), "-a"] + list(argv))


def lab_state():
    with open(STATE) as f:
        return json.load(f)


def host_dump(node):
    """Everything the stack made on a lab host, raw (nothing is redeployed, so nothing is normalised but
    the counters and lifetimes that tick by themselves)."""
    pid = node["pid"]

    def clean(text):
        data = json.loads(text or "[]")

        def strip(obj):
            if isinstance(obj, dict):
                return dict((k, strip(v)) for k, v in obj.items()
                            if k not in ("stats", "stats64", "valid_life_time", "preferred_life_time", "expires",
                                         "used", "updated", "confirmed"))
            if isinstance(obj, list):
                return [strip(v) for v in obj]
            return obj
        return json.dumps(strip(data), sort_keys=True)
    out = {}
    slots = sorted(n for n in in_node(pid, "ip", "netns", "list").split() if n.startswith("mn-slot"))
    assert slots, "no slot namespace on %s: the rollout did not deploy it" % node
    for where in [None] + slots:
        pre = ["ip", "-j"] + (["-n", where] if where else [])
        for what in (["link", "show"], ["addr", "show"], ["-4", "route", "show", "table", "all"],
                     ["-6", "route", "show", "table", "all"], ["-4", "rule", "show"], ["-6", "rule", "show"],
                     ["-4", "neigh", "show", "proxy"], ["-6", "neigh", "show", "proxy"]):
            out["%s %s" % (where or "host", " ".join(what))] = clean(in_node(pid, *(pre + what)))
    for link in json.loads(in_node(pid, "ip", "-j", "link", "show")):
        dev = link["ifname"]
        out["tc qdisc " + dev] = in_node(pid, "tc", "qdisc", "show", "dev", dev)
        for direction in ("ingress", "egress"):
            out["tc filter %s %s" % (dev, direction)] = in_node(pid, "tc", "filter", "show", "dev", dev, direction)
    out["nft"] = in_node(pid, "nft", "list", "ruleset")
    out["datapath record"] = in_node(pid, "cat", "/var/lib/netscale-multinic/datapath.json")
    out["sidecar pids"] = in_node(pid, "sh", "-c", "for u in $(systemctl list-units --plain --no-legend "
                                                   "'netscale-vipinjector@*' | cut -d' ' -f1); do echo $u "
                                                   "$(systemctl show -P MainPID $u); done")
    return out


def tor_dump(node, drop_prefixes=()):
    """Running config (byte for byte) and the BGP tables (prefix -> next hops), minus ``drop_prefixes``."""
    pid = node["pid"]
    out = {"running": in_node(pid, "vtysh", "-c", "show running-config")}
    for fam in ("ipv4", "ipv6"):
        table = json.loads(in_node(pid, "vtysh", "-c", "show bgp %s unicast json" % fam)).get("routes") or {}
        out["bgp " + fam] = dict((p, sorted(json.dumps(sorted((nh.get("ip"), nh.get("afi")) for nh in path.get("nexthops") or []))
                                            for path in paths))
                                 for p, paths in sorted(table.items()) if p not in drop_prefixes)
    return out


def mentions(text, addr):
    """``addr`` as a whole address in ``text`` (198.18.0.4 is not in 198.18.0.40)."""
    return re.search(r"(?<![\w.:])%s(?![\w.:])" % re.escape(addr), text) is not None


def report_of(work):
    """report.json of the newest run (reports/<run id>/)."""
    root = os.path.join(str(work), "reports")
    runs = sorted(d for d in os.listdir(root) if d[:1].isdigit())
    with open(os.path.join(root, runs[-1], "report.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the scoped rollout e2e test needs root (namespaces, FRR, systemd lab hosts)")
    d = tmp_path_factory.mktemp("scoped")
    link_group_vars(d, monitoring_port=MONITORING_PORT, monitoring=False)   # nothing here reads it
    (d / "base.yml").write_text(yaml.safe_dump(BASE))
    (d / "grown.yml").write_text(yaml.safe_dump(grown()))
    try:
        yield d
    finally:
        print("scoped rollout e2e phases (s since start): %s" % json.dumps(TIMES))
        # the lab by PID from its journal (lab.yml absent); nothing of this fabric may stay
        playbook("-i", str(d / "grown.yml"), "playbooks/lab.yml", "-e", "lab_topology=%s" % (d / "grown.yml"),
                 "-e", "lab_state=absent", check=False)
        assert not os.path.exists(os.path.dirname(STATE))


def rollout(work, topology, **extra):
    ev = {"rollout_report_root": str(work / "reports"), "rollout_intended_dir": str(work / "intended"),
          "tor_bgp_intended_dir": str(work / "intended"), "rollout_waves": ["100%"]}
    ev.update(extra)
    return playbook("-i", str(work / topology), "playbooks/rollout.yml", "-e", json.dumps(ev))


def test_grow_by_a_host_and_a_rack_touches_only_the_new_capacity(work):
    base, big = str(work / "base.yml"), str(work / "grown.yml")
    t0 = time.monotonic()
    times = TIMES
    playbook("-i", base, "playbooks/lab.yml", "-e", "lab_topology=%s" % base)
    times['lab built'] = round(time.monotonic() - t0, 1)
    rollout(work, "base.yml")
    assert report_of(work)["run"]["status"] == "passed"
    times['base rollout'] = round(time.monotonic() - t0, 1)

    state = lab_state()
    pids = dict((n, (nd["pid"], nd.get("daemons"))) for n, nd in state["nodes"].items())
    hosts_before = dict((h, host_dump(state["nodes"][h])) for h in OLD_HOSTS)
    tor_before = tor_dump(state["nodes"][UNTOUCHED_TOR])
    times['dumps'] = round(time.monotonic() - t0, 1)

    playbook("-i", big, "playbooks/lab.yml", "-e", "lab_topology=%s" % big)
    times['lab grown'] = round(time.monotonic() - t0, 1)
    grown_state = lab_state()
    assert dict((n, p) for n, p in ((n, (nd["pid"], nd.get("daemons"))) for n, nd in grown_state["nodes"].items())
                if n in pids) == pids, "the lab rebuilt pre-existing nodes"

    run = rollout(work, "grown.yml", rollout_scope="changed")
    times['scoped rollout'] = round(time.monotonic() - t0, 1)
    recap = recaps(run.stdout)
    for h in OLD_HOSTS:
        assert h not in recap, "pre-existing host %s was in a play: %s" % (h, recap.get(h))
    assert recap.get(UNTOUCHED_TOR, {"changed": "0"})["changed"] == "0", recap   # in no play, or 0 changed
    for t in (FABRIC + "-r1-tor", FABRIC + "-r3-tor"):
        assert int(recap[t]["changed"]) > 0, (t, recap)
    for h in NEW_HOSTS:
        assert recap[h]["failed"] == "0" and int(recap[h]["changed"]) > 0, (h, recap)

    rep = report_of(work)
    scope = rep["preflight"]["scope"]
    assert rep["run"]["status"] == "passed"
    assert scope["hosts"]["added"] == sorted(NEW_HOSTS) and scope["deploy"] == NEW_HOSTS, scope
    assert scope["untouched"] == {"hosts": OLD_HOSTS, "tors": [UNTOUCHED_TOR]}, scope
    assert scope["tors"]["changed"] == [FABRIC + "-r1-tor", FABRIC + "-r3-tor"], scope
    assert [w["hosts"] for w in rep["waves"]] == [[NEW_HOSTS[0]], [NEW_HOSTS[1]]]   # canary, then the fleet
    tors = dict((t["name"], t) for t in rep["tors"])
    assert tors[UNTOUCHED_TOR]["changed"] is False and "not touched" in tors[UNTOUCHED_TOR]["status"]
    # every gate of the new capacity evaluated and passed (one host per wave: the ToR gates of the wave are
    # its host's); BGP sessions = slots x NICs, ECMP width = NIC count (2) for every task IP
    for w, h in zip(rep["waves"], NEW_HOSTS):
        mine = dict((g["gate"], g) for g in w["gates"])
        assert {"sidecars", "bgp_sessions", "ecmp_width"} <= set(mine), (h, sorted(mine))
        assert all(g["verdict"] == "pass" for g in mine.values()), (h, [(g["gate"], g["verdict"]) for g in mine.values()])
        assert mine["sidecars"]["target"] == h
        assert mine["bgp_sessions"]["values"]["established"] == mine["bgp_sessions"]["values"]["expected"] == 2
        # each task IP (1 slot, IPv4 + IPv6) has exactly nic_count = 2 FIB next hops on the ToR
        assert mine["ecmp_width"]["values"]["at_width"] == mine["ecmp_width"]["values"]["task_routes"] == 2

    after = lab_state()
    assert dict((n, (nd["pid"], nd.get("daemons"))) for n, nd in after["nodes"].items() if n in pids) == pids
    for h in OLD_HOSTS:
        assert host_dump(after["nodes"][h]) == hosts_before[h], h
    r3 = yaml.safe_load(open(os.path.join(str(work), "intended", FABRIC, "plan", "racks", FABRIC + "-r3.yml")))
    new_rack_aggr = [r3["prefix"]["ipv4"], r3["prefix"]["ipv6"]]
    tor_after = tor_dump(after["nodes"][UNTOUCHED_TOR], drop_prefixes=new_rack_aggr)
    assert tor_after == tor_before
    # the new rack's aggregate is the one thing the untouched ToR learned (from the spine)
    full = tor_dump(after["nodes"][UNTOUCHED_TOR])
    assert set(full["bgp ipv4"]) - set(tor_before["bgp ipv4"]) == {r3["prefix"]["ipv4"]}

    # the same topology again: nothing to deploy, said so, no wave, no ToR configured
    again = rollout(work, "grown.yml", rollout_scope="changed")
    times['second scoped rollout'] = round(time.monotonic() - t0, 1)
    rep = report_of(work)
    assert rep["preflight"]["scope"]["nothing"] and rep["waves"] == [], rep["preflight"]
    assert rep["run"]["message"].startswith("scope changed: nothing to deploy"), rep["run"]
    assert all(int(r["changed"]) == 0 for r in recaps(again.stdout).values()), recaps(again.stdout)

    # --- decommission the added host (reachable): drained, host state removed, tombstone, r1's ToR re-rendered
    gone = NEW_HOSTS[0]
    no_h2 = grown()
    no_h2["buildings"][0]["zones"][0]["racks"][0]["hosts"].pop()
    (work / "no-h2.yml").write_text(yaml.safe_dump(no_h2))
    r1 = yaml.safe_load(open(os.path.join(str(work), "intended", FABRIC, "plan", "racks", FABRIC + "-r1.yml")))
    h2 = [h for h in r1["hosts"] if h["name"] == gone][0]
    # on its ToR, h2 is: a peer-group per slot with the containers' per-NIC IPv6 addresses as neighbours (the
    # sessions carry both families), a route-map and a prefix-list per slot permitting its task IPs
    h2_marks = sorted(set([n["address"]["ipv6"] for sl in h2["slots"] for n in sl["nics"]]
                          + [sl["task_ip"][fam] for sl in h2["slots"] for fam in ("ipv4", "ipv6")]
                          + ["HOST-%s-S%d" % (gone, sl["slot"]) for sl in h2["slots"]]
                          + ["PL-TASK-%s-S%d-IPV4" % (gone, sl["slot"]) for sl in h2["slots"]]
                          + ["RM-HOST-%s-S%d-IPV6-IN" % (gone, sl["slot"]) for sl in h2["slots"]]))
    r1_tor = after["nodes"][FABRIC + "-r1-tor"]
    running = in_node(r1_tor["pid"], "vtysh", "-c", "show running-config")
    assert [m for m in h2_marks if not mentions(running, m)] == [], "h2 not on its ToR before the decommission"
    tor_full_before = tor_dump(after["nodes"][UNTOUCHED_TOR])
    dec = playbook("-i", big, "playbooks/decommission.yml", "-e", json.dumps({
        "decommission_hosts": [gone], "decommission_topology": str(work / "no-h2.yml"),
        "fabric_intended_dir": str(work / "intended"), "tor_bgp_intended_dir": str(work / "intended")}))
    recap = recaps(dec.stdout)
    times['decommission host'] = round(time.monotonic() - t0, 1)
    # the drain was confirmed on the ToR before the host state went (gate: none of its task IPs in the FIB)
    drained = dec.stdout.split("TASK [Gate drained on the ToR", 1)[-1].split("TASK [", 1)[0]
    assert "ok: [%s -> %s-r1-tor]" % (gone, FABRIC) in drained, drained[:2000]
    assert all(h not in recap for h in OLD_HOSTS), recap
    assert recap.get(UNTOUCHED_TOR, {"changed": "0"})["changed"] == "0", recap
    node = lab_state()["nodes"][gone]
    assert not [n for n in in_node(node["pid"], "ip", "netns", "list").split() if n.startswith("mn-slot")]
    assert subprocess.run(["nsenter", "-t", str(node["pid"]), "-a", "test", "-e",
                           "/var/lib/netscale-multinic/datapath.json"], check=False).returncode != 0
    running = in_node(r1_tor["pid"], "vtysh", "-c", "show running-config")
    assert [m for m in h2_marks if mentions(running, m)] == [], "retired host's neighbours/prefix-lists on the ToR"
    retired = yaml.safe_load(open(os.path.join(str(work), "intended", FABRIC, "plan", "retired.yml")))
    assert gone in json.dumps(retired)
    final = lab_state()
    for h in OLD_HOSTS:
        assert host_dump(final["nodes"][h]) == hosts_before[h], h
    assert tor_dump(final["nodes"][UNTOUCHED_TOR]) == tor_full_before

    # --- rack 3 leaves the lab first (its host is gone): decommissioning it reports the host, is not fatal
    playbook("-i", base, "playbooks/lab.yml", "-e", "lab_topology=%s" % base)
    times['lab shrunk'] = round(time.monotonic() - t0, 1)
    assert FABRIC + "-r3-h1" not in lab_state()["nodes"]
    dec = playbook("-i", str(work / "no-h2.yml"), "playbooks/decommission.yml", "-e", json.dumps({
        "decommission_racks": [FABRIC + "-r3"], "decommission_topology": base,
        "fabric_intended_dir": str(work / "intended"), "tor_bgp_intended_dir": str(work / "intended")}))
    flat = " ".join(dec.stdout.split())
    assert "NOT removed" in flat and FABRIC + "-r3-h1" in flat.split("NOT removed", 1)[1][:400], flat[-2000:]
    retired = yaml.safe_load(open(os.path.join(str(work), "intended", FABRIC, "plan", "retired.yml")))
    assert FABRIC + "-r3" in json.dumps(retired)
    final = lab_state()
    for h in OLD_HOSTS:
        assert host_dump(final["nodes"][h]) == hosts_before[h], h
    times["end"] = round(time.monotonic() - t0, 1)
