# -*- coding: utf-8 -*-
"""Live fabric lab: BGP, reachability, systemd units through Ansible, ops, idempotence, teardown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(__file__))

import labsnap  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab import ops  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import open_lab  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan  # noqa: E402
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology  # noqa: E402


def _plan():
    dummy, data = labsnap.lab_names()
    topo = load_topology(data, labsnap.TOPOLOGY)
    return topo, FabricPlan(topo).allocate()


def test_build_reports_nodes(lab):
    dummy, state = lab
    kinds = sorted(n["kind"] for n in state["nodes"].values())
    assert kinds == ["gpu_host"] * 4 + ["spine", "storage", "tor", "tor"]
    assert state["status"] == "ready"


def test_spine_sessions_established(lab):
    dummy, state = lab
    topo, plan = _plan()
    for spine in topo.spines:
        data = plan.spine_data(spine)
        out = labsnap.nsenter(state["nodes"][spine.name]["pid"], "vtysh", "-c", "show bgp summary json").stdout
        summ = json.loads(out)
        want = {"ipv4Unicast": {d["ipv4"]["tor"] for d in data["downlinks"]},
                "ipv6Unicast": {d["ipv6"]["tor"] for d in data["downlinks"]}}
        for af, peers in want.items():
            got = summ[af]["peers"]
            assert set(got) == peers
            assert all(p["state"] == "Established" for p in got.values()), got
            # the spine learned each rack aggregate from its ToR
            assert all(p["pfxRcd"] == 1 for p in got.values()), got


def test_every_host_nic_pings_its_gateway(lab):
    dummy, state = lab
    topo, plan = _plan()
    failures = []
    for host in topo.hosts:
        hd = plan.host_data(host)
        pid = state["nodes"][host.name]["pid"]
        for nic in hd["nics"]:
            for fam in ("ipv6", "ipv4"):
                p = labsnap.nsenter(pid, "ping", "-c", "1", "-W", "2", "-I", nic["name"], nic["gateway"][fam], check=False)
                if p.returncode != 0:
                    failures.append((host.name, nic["name"], nic["gateway"][fam]))
    assert not failures


def test_hosts_run_systemd_with_own_machine_ids(lab):
    dummy, state = lab
    ids = set()
    for name, node in state["nodes"].items():
        if node["kind"] != "gpu_host":
            continue
        pid = node["pid"]
        assert open("/proc/%d/comm" % pid).read().strip() == "systemd"
        p = subprocess.run(["nsenter", "-t", str(pid), "-a", "systemctl", "is-system-running"], capture_output=True, text=True, check=False)
        assert p.stdout.strip() in ("running", "degraded"), (name, p.stdout, p.stderr)
        ids.add(subprocess.run(["nsenter", "-t", str(pid), "-a", "cat", "/etc/machine-id"], capture_output=True,
                               text=True, check=False).stdout.strip())
    assert len(ids) == 4


def test_systemd_unit_through_ansible_runs_only_on_its_host(lab, tmp_path):
    dummy, state = lab
    pb = tmp_path / "unit.yml"
    pb.write_text(textwrap.dedent("""\
        - name: Start a unit on one lab host through the nsenter connection
          hosts: lab-r1-h1
          gather_facts: false
          tasks:
            - name: Unit file
              ansible.builtin.copy:
                dest: /etc/systemd/system/mnl-e2e.service
                mode: "0644"
                content: |
                  [Unit]
                  Description=netscale lab e2e probe unit
                  [Service]
                  ExecStart=/bin/sleep infinity
            - name: Start it
              ansible.builtin.systemd_service:
                name: mnl-e2e.service
                state: started
                daemon_reload: true
        """))
    out = labsnap.playbook("-i", labsnap.TOPOLOGY, str(pb))
    assert labsnap.recap(out.stdout, "lab-r1-h1")["failed"] == "0"
    for name, node in state["nodes"].items():
        if node["kind"] != "gpu_host":
            continue
        pid = str(node["pid"])
        active = subprocess.run(["nsenter", "-t", pid, "-a", "systemctl", "is-active", "mnl-e2e.service"],
                                capture_output=True, text=True, check=False).stdout.strip()
        has_file = subprocess.run(["nsenter", "-t", pid, "-a", "test", "-e", "/etc/systemd/system/mnl-e2e.service"], check=False).returncode == 0
        if name == "lab-r1-h1":
            assert active == "active" and has_file
            main = subprocess.run(["nsenter", "-t", pid, "-a", "systemctl", "show", "-P", "MainPID", "mnl-e2e.service"],
                                  capture_output=True, text=True, check=False).stdout.strip()
            # the process seen from the machine: inside lab-r1-h1's cgroup and pid namespace
            procs = [p for p in os.listdir("/proc") if p.isdigit()]
            found = [p for p in procs if _cgroup(p).find("/mnl/lab/lab-r1-h1/") >= 0 and _comm(p) == "sleep"]
            assert found and main != "0"
        else:
            assert active != "active" and not has_file, name


def test_module_runs_use_the_lab_interpreter_and_its_compile_cache(lab, tmp_path):
    """Ansible runs its modules on every lab node with the lab's interpreter (lab/interpreter.py): the client Ansible
    starts (python3 -S with the AnsiballZ script) hands the run to the node's zygote, which forks it (a host's
    zygote is its systemd unit's main process); the first run on a node fills that node's compile cache (in its
    directory, bound at /run/netscale-lab-python inside the node), a second run of the same modules compiles nothing
    new."""
    from ansible_collections.netscale.multinic.plugins.module_utils.lab import interpreter
    dummy, state = lab
    nodes = {"lab-r1-h1": state["nodes"]["lab-r1-h1"]}
    nodes.update(dict([next((n, v) for n, v in sorted(state["nodes"].items()) if v["kind"] == "tor")]))
    assert all(v["python"] == interpreter.IN_NODE_PATH for v in state["nodes"].values()), state["nodes"]
    pb = tmp_path / "modules.yml"
    pb.write_text(textwrap.dedent("""\
        - name: Module runs on a host and a ToR
          hosts: %s
          gather_facts: false
          tasks:
            - name: The module run's process, the zygote (its grandparent) and the client, as the node sees them
              ansible.builtin.shell: |
                cmd() { tr '\\0' ' ' < /proc/$1/cmdline; }
                parent() { awk '{print $4}' /proc/$1/stat; }
                z=$(parent $(parent $PPID))
                {
                  echo "module=$(cmd $PPID)"
                  echo "zygote=$(cmd $z)"
                  echo "zygote_pid=$z"
                  for p in /proc/[0-9]*; do
                    c=$(cmd ${p#/proc/} 2>/dev/null) || continue
                    case "$c" in "/usr/bin/python3 -S %s "*AnsiballZ_command.py*) echo "client=$c";; esac
                  done
                } > %s/module-process.txt
              changed_when: false
        """ % (",".join(sorted(nodes)), interpreter.IN_NODE_PATH, interpreter.IN_NODE_DIR)))

    def cache(node):
        d = os.path.join(node["dir"], "python", "cache")
        return sorted(os.listdir(d))

    before = dict((n, cache(v)) for n, v in nodes.items())
    out = labsnap.playbook("-i", labsnap.TOPOLOGY, str(pb))
    for name in nodes:
        assert labsnap.recap(out.stdout, name)["failed"] == "0", out.stdout[-3000:]
    # the shell module's parent: a fork of the zygote (/usr/bin/python3 running the lab's program with --serve), the
    # zygote its grandparent; the client Ansible started runs the lab's program with the AnsiballZ script
    serve = "/usr/bin/python3 %s --serve" % interpreter.IN_NODE_PATH
    for name, node in nodes.items():
        path = os.path.join(node["dir"], "python", "module-process.txt")
        with open(path) as f:
            seen = [line.rstrip("\n").split("=", 1) for line in f]
        os.unlink(path)
        one = dict(kv for kv in seen if kv[0] != "client")
        clients = [v for k, v in seen if k == "client"]
        assert one["module"].strip() == one["zygote"].strip() == serve, (name, seen)
        # a host has its own PID namespace: its one client; a box sees the machine's processes (other runs too)
        assert (len(clients) == 1 if node["kind"] == "gpu_host" else len(clients) >= 1), (name, seen)
        if node["kind"] == "gpu_host":   # the host's zygote: its systemd unit's main process
            main = subprocess.run(["nsenter", "-t", str(node["pid"]), "-a", "systemctl", "show", "-p", "MainPID",
                                   "--value", interpreter.ZYGOTE_UNIT], capture_output=True, text=True, check=False)
            assert main.stdout.strip() == one["zygote_pid"], (name, main.stdout, main.stderr, seen)
    filled = dict((n, cache(v)) for n, v in nodes.items())
    for name in nodes:
        assert len(filled[name]) > len(before[name]) and not [e for e in filled[name] if e.endswith(".tmp")], name
    out = labsnap.playbook("-i", labsnap.TOPOLOGY, str(pb))
    assert all(labsnap.recap(out.stdout, n)["failed"] == "0" for n in nodes), out.stdout[-3000:]
    assert dict((n, cache(v)) for n, v in nodes.items()) == filled   # nothing compiled again
    for node in nodes.values():
        os.unlink(os.path.join(node["dir"], "python", "module-process.txt"))
    for name, node in nodes.items():   # inside the node: the program, root's only
        ls = subprocess.run(["nsenter", "-t", str(node["pid"]), "-m", "stat", "-c", "%a %U", interpreter.IN_NODE_PATH],
                            capture_output=True, text=True, check=False)
        assert ls.stdout.strip() == "700 root", (name, ls.stdout, ls.stderr)


def _cgroup(pid):
    try:
        return open("/proc/%s/cgroup" % pid).read()
    except OSError:
        return ""


def _comm(pid):
    try:
        return open("/proc/%s/comm" % pid).read().strip()
    except OSError:
        return ""


def test_second_build_changes_nothing(lab):
    dummy, state = lab
    out = labsnap.playbook("playbooks/lab.yml")
    assert labsnap.recap(out.stdout, "localhost")["changed"] == "0"
    assert labsnap.lab_state()["nodes"] == state["nodes"]


def test_ops_speed_loss_probe(lab):
    dummy, state = lab
    lb = open_lab(labsnap.TOPOLOGY)
    host = "lab-r1-h1"
    r = ops.set_speed(lb, host, "eth0", "200mbit")
    assert r["changed"] and not ops.set_speed(lb, host, "eth0", "200mbit")["changed"]
    tc = subprocess.run(["ip", "netns", "exec", "mnl-lab-r1-tor", "tc", "-j", "qdisc", "show", "dev", "host1-0"],
                        capture_output=True, text=True, check=False).stdout
    assert any(q["kind"] == "tbf" and q["options"]["rate"] * 8 == 200000000 for q in json.loads(tc))
    assert ops.set_speed(lb, host, "eth0", None)["changed"]
    # silent loss: the gateway stops answering on that NIC, the link stays up
    pid = state["nodes"][host]["pid"]
    gw = "fd00:10:0:1::1"
    assert ops.set_loss(lb, host, "eth1", True)["changed"]
    assert labsnap.nsenter(pid, "ping", "-c", "1", "-W", "1", "-I", "eth1", gw, check=False).returncode != 0
    assert ops.set_loss(lb, host, "eth1", False)["changed"]
    assert labsnap.nsenter(pid, "ping", "-c", "1", "-W", "2", "-I", "eth1", gw, check=False).returncode == 0
    # probe: per-NIC counters explain the bytes iperf3 moved, both directions
    res = ops.probe(lb, host, flows=4, duration=2, direction="both", family="ipv6")
    for d in ("up", "down"):
        assert res[d]["bits_per_second"] > 0
        assert abs(sum(res[d]["nic_shares"].values()) - 1.0) < 1e-3
        assert 1.0 / 2 - 1e-6 <= res[d]["jain_index"] <= 1.0
    assert not [p for p in labsnap.snapshot()["processes"] if "iperf3" in p]


def test_tor_bgpd_restart_recovers(lab):
    dummy, state = lab
    lb = open_lab(labsnap.TOPOLOGY)
    r = ops.daemon(lb, "lab-r1-tor", "bgpd", "restart")
    assert r["changed"] and r["pid"] != r["old_pid"]
    spine = state["nodes"]["lab-spine1"]["pid"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        summ = json.loads(labsnap.nsenter(spine, "vtysh", "-c", "show bgp summary json").stdout)
        if all(p["state"] == "Established" for af in ("ipv4Unicast", "ipv6Unicast") for p in summ[af]["peers"].values()):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("sessions did not recover after the bgpd restart: %s" % summ)
    # the restart replaced the PID in the state: the lab is still healthy (no rebuild)
    out = labsnap.playbook("playbooks/lab.yml")
    assert labsnap.recap(out.stdout, "localhost")["changed"] == "0"


def _node_dumps(state, skip=()):
    """Per node: its PIDs (holder/init and daemons) and its kernel state (links, addresses, routes,
    neighbours' proxy entries) as ip -j shows them; statistics left out. A box's routes are BGP's
    and may still be settling after the bgpd restart of an earlier test: links and addresses only."""
    out = {}
    for name, node in sorted(state["nodes"].items()):
        if name in skip:
            continue
        ns = node["netns"]
        d = {"pid": node["pid"], "daemons": node.get("daemons")}
        whats = [["link", "show"], ["-6", "addr", "show"], ["-4", "addr", "show"]]
        if node["kind"] == "gpu_host":
            whats += [["-6", "route", "show"], ["-4", "route", "show"], ["neigh", "show", "proxy"]]
        for what in whats:
            d[" ".join(what)] = subprocess.run(["ip", "-n", ns, "-j"] + what, capture_output=True, text=True,
                                               check=True).stdout
        out[name] = d
    return out


def test_hosts_removed_and_added_in_place(lab, tmp_path):
    """The lab follows the topology incrementally: a GPU host removed from the topology goes (its
    processes, namespace, NIC links), every other node keeps its PIDs and kernel state; put back, it
    is built alone and reaches its gateways. Recap and dumps are the evidence."""
    import yaml
    state = labsnap.lab_state()
    name, rack_name = "lab-r2-h2", "lab-r2"
    tor = state["nodes"]["lab-r2-tor"]
    ports = [li["ifname"] for li in json.loads(subprocess.run(
        ["ip", "-n", tor["netns"], "-j", "link", "show"], capture_output=True, text=True, check=True).stdout)]
    topo, plan = _plan()
    host = next(h for h in topo.hosts if h.name == name)
    host_ports = [n["tor_port"] for n in plan.host_data(host)["nics"]]
    assert set(host_ports) <= set(ports)
    before = _node_dumps(state, skip=(name, "lab-r2-tor"))
    host_pid = state["nodes"][name]["pid"]
    dummy, data = labsnap.lab_names()
    for rack in data["buildings"][0]["zones"][0]["racks"]:
        if rack["name"] == rack_name:
            rack["hosts"] = [h for h in rack["hosts"] if h["name"] != name]
    smaller = tmp_path / "fabric.yml"
    smaller.write_text(yaml.safe_dump(data))
    try:
        out = labsnap.playbook("playbooks/lab.yml", "-e", "lab_topology=%s" % smaller)
        assert "in place: removed %s; added none; reloaded none;" % name in _flat(out.stdout), out.stdout[-3000:]
        shrunk = labsnap.lab_state()
        assert name not in shrunk["nodes"] and shrunk["status"] == "ready"
        assert not os.path.exists("/run/netns/%s" % state["nodes"][name]["netns"])
        assert not _alive(host_pid)
        assert not [r for r in shrunk["resources"] if r.get("node") == name or name in json.dumps(r)]
        left = [li["ifname"] for li in json.loads(subprocess.run(
            ["ip", "-n", tor["netns"], "-j", "link", "show"], capture_output=True, text=True, check=True).stdout)]
        assert sorted(left) == sorted(set(ports) - set(host_ports)), (ports, left)
        assert _node_dumps(shrunk, skip=("lab-r2-tor",)) == before
        assert shrunk["nodes"]["lab-r2-tor"]["daemons"] == tor["daemons"]
    finally:
        out = labsnap.playbook("playbooks/lab.yml")
    assert "in place: removed none; added %s; reloaded none;" % name in _flat(out.stdout), out.stdout[-3000:]
    grown = labsnap.lab_state()
    assert grown["nodes"][name]["pid"] != host_pid
    assert _node_dumps(grown, skip=(name, "lab-r2-tor")) == before
    assert grown["nodes"]["lab-r2-tor"]["daemons"] == tor["daemons"]
    pid = grown["nodes"][name]["pid"]
    for nic in plan.host_data(host)["nics"]:
        for fam in ("ipv6", "ipv4"):
            assert labsnap.nsenter(pid, "ping", "-c", "1", "-W", "2", "-I", nic["name"], nic["gateway"][fam],
                                   check=False).returncode == 0, (nic["name"], fam)
    again = labsnap.playbook("playbooks/lab.yml")
    assert labsnap.recap(again.stdout, "localhost")["changed"] == "0"


def _alive(pid):
    """Running (a zombie waiting for its reaper is gone already)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _flat(text):
    """Playbook output with whitespace runs folded (the callback wraps long lines)."""
    return " ".join(text.split())


def _pids(state):
    return dict((n, (nd["pid"], nd.get("daemons"))) for n, nd in state["nodes"].items())


def test_rack_added_and_removed_in_place(lab, tmp_path):
    """A rack added to the topology: its ToR box and host are built, the spine gets its new config in
    place (same daemons), its session to the new ToR comes up; every other node keeps its PIDs and the
    hosts their kernel state. Removed again: back to the original nodes, spine sessions as before."""
    import yaml
    state = labsnap.lab_state()
    hosts = [n for n, nd in state["nodes"].items() if nd["kind"] == "gpu_host"]
    # a host (re)built by the previous test may still run IPv6 DAD: wait until no address is tentative
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any("tentative" in subprocess.run(
            ["ip", "-n", state["nodes"][n]["netns"], "-6", "addr", "show"], capture_output=True, text=True,
            check=True).stdout for n in hosts):
        time.sleep(0.2)
    before, pids = _node_dumps(state, skip=[n for n in state["nodes"] if n not in hosts]), _pids(state)
    dummy, data = labsnap.lab_names()
    racks = data["buildings"][0]["zones"][0]["racks"]
    racks.append({"id": 3, "name": "lab-r3", "hosts": [{"id": 1, "name": "lab-r3-h1", "nics": 2}]})
    bigger = tmp_path / "fabric.yml"
    bigger.write_text(yaml.safe_dump(data))
    spine = state["nodes"]["lab-spine1"]["pid"]
    try:
        out = labsnap.playbook("playbooks/lab.yml", "-e", "lab_topology=%s" % bigger)
        assert "in place: removed none; added lab-r3-h1,lab-r3-tor; reloaded lab-spine1;" in _flat(out.stdout), out.stdout[-3000:]
        grown = labsnap.lab_state()
        assert set(grown["nodes"]) == set(state["nodes"]) | {"lab-r3-tor", "lab-r3-h1"}
        assert dict((n, p) for n, p in _pids(grown).items() if n in pids) == pids
        assert _node_dumps(grown, skip=[n for n in grown["nodes"] if n not in hosts]) == before
        summ = json.loads(labsnap.nsenter(spine, "vtysh", "-c", "show bgp summary json").stdout)
        peers = summ["ipv6Unicast"]["peers"]
        assert len(peers) == 3 and all(p["state"] == "Established" for p in peers.values()), peers
        new_host = grown["nodes"]["lab-r3-h1"]["pid"]
        for nic_gw in _gateways(bigger, "lab-r3-h1"):
            assert labsnap.nsenter(new_host, "ping", "-c", "1", "-W", "2", nic_gw, check=False).returncode == 0, nic_gw
    finally:
        out = labsnap.playbook("playbooks/lab.yml")
    assert "in place: removed lab-r3-h1,lab-r3-tor; added none; reloaded lab-spine1;" in _flat(out.stdout), out.stdout[-3000:]
    back = labsnap.lab_state()
    assert set(back["nodes"]) == set(state["nodes"]) and _pids(back) == pids
    assert _node_dumps(back, skip=[n for n in back["nodes"] if n not in hosts]) == before
    summ = json.loads(labsnap.nsenter(spine, "vtysh", "-c", "show bgp summary json").stdout)
    assert len(summ["ipv6Unicast"]["peers"]) == 2, summ["ipv6Unicast"]["peers"]
    assert not [n for n in os.listdir("/run/netns") if "lab-r3" in n]


def _gateways(topology_path, host_name):
    from ansible_collections.netscale.multinic.plugins.module_utils.lab.common import load_yaml
    topo = load_topology(load_yaml(str(topology_path)), str(topology_path))
    plan = FabricPlan(topo).allocate()
    host = next(h for h in topo.hosts if h.name == host_name)
    return [n["gateway"][fam] for n in plan.host_data(host)["nics"] for fam in ("ipv6", "ipv4")]


def test_teardown_leaves_nothing(lab, clean_before):
    dummy, state = lab
    pids = [r["pid"] for r in labsnap.lab_state()["resources"] if r["type"] == "process"]
    labsnap.playbook("playbooks/lab.yml", "-e", "lab_state=absent")
    after = labsnap.snapshot()
    assert after == clean_before
    alive = [p for p in pids if os.path.exists("/proc/%d" % p) and "Z" not in open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()[0]]
    assert not alive
