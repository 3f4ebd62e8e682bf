# -*- coding: utf-8 -*-
"""MPTCP mode on the 4-NIC host (namespaces, prefix mnd), both datapath modes.

One unmodified iperf3 connection (``mptcpize run``; iperf3 3.12 has no --mptcp) to the storage node,
which is an MPTCP peer (limits set by dp_harness), egress over IPv6 and ingress (-R) over IPv4.
Asserted on observed state: every NIC's byte counter carries >= 15 % (one plain TCP connection puts
all of its bytes on one NIC), the connection's subflows (``ss -M``: subflows = NIC count) and the
local address of each subflow (one per container NIC address), the MPTCP join counters, a second
apply changing nothing, and exact removal when the mode is turned off. No throughput thresholds
(figures: bench/mptcp_bench.py, docs/performance.md).
"""
import json
import re
import time

import pytest

from labkit import dp_harness as H

HOST = "lab-r1-h2"
RUN = 3
MIN_SHARE = 0.15


def _ns_sh(ns, argv):
    return H.sh(["ip", "netns", "exec", ns] + argv).stdout


def mptcp_view(ns):
    """(subflow counts of the MPTCP sockets, local addresses of the TCP subflows) in ``ns``."""
    msk = [int(n) for n in re.findall(r"\bsubflows:(\d+)", _ns_sh(ns, ["ss", "-MniH"]))]
    sub = _ns_sh(ns, ["ss", "-tniH"])
    local = set()
    for block in re.split(r"\n(?=\S)", sub):
        if "tcp-ulp-mptcp" in block:
            addr = block.split()[3]
            local.add(addr.rsplit(":", 1)[0].split("%")[0].strip("[]"))
    return msk, local


def joins(ns):
    d = json.loads(_ns_sh(ns, ["nstat", "-a", "-z", "-j", "MPTcpExtMPJoinSynAckRx", "MPTcpExtMPJoinSynRx"]))
    return d["kernel"].get("MPTcpExtMPJoinSynAckRx", 0)


def one_connection(fab, host, dst, reverse, port):
    ns = host.slot_ns(1)
    direction = "rx" if reverse else "tx"
    b0, j0 = host.nic_bytes(direction), joins(ns)
    srv = fab.iperf_server(fab.sto, port, mptcp=True)
    cli = fab.spawn(ns, ["mptcpize", "run", "iperf3", "-c", dst, "-p", str(port), "-P", "1", "-t", str(RUN),
                         "--json"] + (["-R"] if reverse else []))
    time.sleep(RUN / 2.0)
    msk, local = mptcp_view(ns)
    out, err = cli.communicate(timeout=RUN + 30)
    srv.wait(10)
    res = json.loads(out)
    assert "error" not in res, res.get("error")
    shares, total = H.shares(b0, host.nic_bytes(direction))
    return {"shares": shares, "bytes": total, "msk": msk, "local": local, "joins": joins(ns) - j0,
            "mbps": res["end"]["sum_received"]["bits_per_second"] / 1e6}


@pytest.mark.parametrize("mode", ["ebpf", "kernel"])
def test_mptcp_one_connection_uses_every_nic(fabric, mode):
    host = fabric.host(HOST)
    ebpf = mode == "ebpf"
    ns = host.slot_ns(1)
    n = len(host.nics)
    host.core("apply", ebpf=ebpf, mptcp=True)
    again = host.core("apply", ebpf=ebpf, mptcp=True)
    assert again["changes"] == [], "second run must change nothing: %s" % again["changes"]
    eps = json.loads(H.sh(["ip", "-n", ns, "-j", "mptcp", "endpoint", "show"]).stdout)
    slot = [s for s in host.data["slots"] if s["slot"] == 1][0]
    nic_addrs = dict((sn["address"][f], host.nics[sn["index"]]) for sn in slot["nics"] for f in ("ipv4", "ipv6"))
    assert sorted((e["address"], e["dev"], e.get("subflow"), e.get("fullmesh")) for e in eps) == \
        sorted((a, d, True, None) for a, d in nic_addrs.items())
    assert "subflows %d" % n in H.sh(["ip", "-n", ns, "mptcp", "limits", "show"]).stdout
    assert "subflows 8" in fabric.mptcp_storage()

    for dst, reverse, port in ((H.STO6, False, 5311), (H.STO4, True, 5312)):
        r = one_connection(fabric, host, dst, reverse, port)
        label = "%s %s %s" % (mode, "ingress" if reverse else "egress", "IPv4" if reverse else "IPv6")
        print("%s: one MPTCP connection %.0f Mbit/s, NIC shares %s, subflows %s, local %s, joins %d" % (
            label, r["mbps"], {k: round(v, 3) for k, v in sorted(r["shares"].items())}, r["msk"],
            sorted(r["local"]), r["joins"]))
        assert r["bytes"] > 0
        for nic, share in sorted(r["shares"].items()):
            assert share >= MIN_SHARE, "%s: NIC %s carried %.3f of the bytes (< %.2f): %s" % (
                label, nic, share, MIN_SHARE, r["shares"])
        # iperf3 opens a control and a data connection, both MPTCP: each joins one subflow per NIC
        assert r["msk"] and max(r["msk"]) == n, "%s: subflows of the MPTCP sockets %s, want %d" % (label, r["msk"], n)
        fam_addrs = set(a for a in nic_addrs if (":" in a) == (not reverse))
        assert fam_addrs <= r["local"], "%s: no subflow from %s (subflows from %s)" % (
            label, sorted(fam_addrs - r["local"]), sorted(r["local"]))
        assert r["joins"] == 2 * n, "%s: %d MP_JOIN SYN/ACKs, want %d" % (label, r["joins"], 2 * n)

    # turned off: check mode lists the removal and changes nothing; then exact removal, nothing left to do
    check = host.core("check", ebpf=ebpf, mptcp=False)["changes"]
    assert len(json.loads(H.sh(["ip", "-n", ns, "-j", "mptcp", "endpoint", "show"]).stdout)) == len(nic_addrs)
    off = host.core("apply", ebpf=ebpf, mptcp=False)["changes"]
    assert off == check, "check mode listed %s, the run did %s" % (check, off)
    assert any(c.startswith("delete mptcp endpoint") for c in off) and \
        any(c.startswith("mptcp settings in %s restored" % ns) for c in off), off
    assert host.core("apply", ebpf=ebpf, mptcp=False)["changes"] == []
    assert json.loads(H.sh(["ip", "-n", ns, "-j", "mptcp", "endpoint", "show"]).stdout or "[]") == []
    assert "subflows 2 " in H.sh(["ip", "-n", ns, "mptcp", "limits", "show"]).stdout + " "
    for f in ("-4", "-6"):
        rules = H.sh(["ip", "-n", ns, f, "rule", "show"]).stdout
        assert "lookup 110" not in rules, rules
        for k in range(n):
            assert H.sh(["ip", "-n", ns, f, "route", "show", "table", str(1100 + k)], check=False).stdout.strip() == ""


def _endpoints(ns):
    eps = json.loads(H.sh(["ip", "-n", ns, "-j", "mptcp", "endpoint", "show"]).stdout or "[]")
    return sorted((e["address"], e.get("dev"), bool(e.get("subflow")), bool(e.get("backup"))) for e in eps)


def test_mptcp_families_ipv4_gives_room_for_the_backup_endpoint(fabric):
    """4-NIC dual-stack slot (issue 14): with MPTCP for IPv4 only the live slot converges to 4 subflow
    endpoints (the NICs' IPv4 addresses) + the backup endpoint of the task IPv4, no IPv6 endpoint, rule
    or per-NIC route; deletions run before additions (the kernel refuses a 9th endpoint); back to both
    families: the 8 per-NIC endpoints. No traffic (the figures are the bench's)."""
    host = fabric.host(HOST)
    ns = host.slot_ns(1)
    slot = [s for s in host.data["slots"] if s["slot"] == 1][0]
    dev = dict((sn["address"][f], host.nics[sn["index"]]) for sn in slot["nics"] for f in ("ipv4", "ipv6"))
    both = sorted((a, d, True, False) for a, d in dev.items())
    v4 = sorted([(a, d, True, False) for a, d in dev.items() if ":" not in a] +
                [(host.task_ip("ipv4"), None, False, True)])
    host.core("apply", ebpf=False, mptcp=True)
    assert _endpoints(ns) == both

    check = host.core("check", ebpf=False, mptcp=True, mptcp_families=["ipv4"])["changes"]
    assert _endpoints(ns) == both, "check mode changed nothing"
    changes = host.core("apply", ebpf=False, mptcp=True, mptcp_families=["ipv4"])["changes"]
    assert changes == check, "check mode listed %s, the run did %s" % (check, changes)
    # per namespace (every slot switches; the kernel's limit is per namespace): deletions first
    mine = [c for c in changes if re.search(r" in %s(:| |$)" % re.escape(ns), c)]
    kinds = [c.startswith(("delete ", "flush ")) for c in mine]
    assert kinds == sorted(kinds, reverse=True) and kinds.count(True) == 4 + 4 + 4, mine
    assert mine[-1] == "mptcp endpoint %s backup in %s" % (host.task_ip("ipv4"), ns), mine
    assert _endpoints(ns) == v4, _endpoints(ns)
    assert "lookup 110" not in H.sh(["ip", "-n", ns, "-6", "rule", "show"]).stdout
    assert H.sh(["ip", "-n", ns, "-4", "rule", "show"]).stdout.count("lookup 110") == 4
    for k in range(len(host.nics)):
        assert H.sh(["ip", "-n", ns, "-6", "route", "show", "table", str(1100 + k)], check=False).stdout.strip() == ""
        assert "default via 169.254.1.1 dev %s" % host.nics[k] in \
            H.sh(["ip", "-n", ns, "-4", "route", "show", "table", str(1100 + k)]).stdout
    again = host.core("apply", ebpf=False, mptcp=True, mptcp_families=["ipv4"])["changes"]
    assert again == [], "second run must change nothing: %s" % again

    back = host.core("apply", ebpf=False, mptcp=True)["changes"]
    assert back[0].startswith("delete mptcp endpoint %s " % host.task_ip("ipv4")), back
    assert _endpoints(ns) == both
    assert host.core("apply", ebpf=False, mptcp=True)["changes"] == []
    host.core("apply", ebpf=False, mptcp=False)
    assert _endpoints(ns) == []
