# -*- coding: utf-8 -*-
"""Check mode, idempotency, removal (host ends exactly as it was) and bad input, both modes."""
import copy
import json
import os

import pytest

from labkit import dp_harness as H


def snapshot(fab, host):
    """Everything the datapath may touch in the host namespace, normalised."""
    ns = host.ns
    out = {}
    for what in (["addr", "show"], ["-4", "route", "show", "table", "all"], ["-6", "route", "show", "table", "all"],
                 ["-4", "rule", "show"], ["-6", "rule", "show"], ["-4", "neigh", "show", "proxy"],
                 ["-6", "neigh", "show", "proxy"]):
        data = json.loads(H.sh(["ip", "-n", ns, "-j"] + what).stdout or "[]")
        for d in data:
            for k in ("stats", "stats64", "operstate", "flags", "linkmode", "addr_info_volatile", "expires"):
                d.pop(k, None)
            for a in d.get("addr_info", []):
                a.pop("valid_life_time", None)
                a.pop("preferred_life_time", None)
        out[" ".join(what)] = sorted(json.dumps(d, sort_keys=True) for d in data)
    for nic in host.nics:
        out["qdisc " + nic] = sorted(q["kind"] for q in json.loads(H.sh(["tc", "-n", ns, "-j", "qdisc", "show", "dev", nic]).stdout))
        out["filter " + nic] = H.sh(["tc", "-n", ns, "filter", "show", "dev", nic, "ingress"]).stdout
    p = H.sh(["nsenter", "--net=/run/netns/" + ns, "sh", "-c",
              "for f in /proc/sys/net/ipv4/conf/*/* /proc/sys/net/ipv6/conf/*/* /proc/sys/net/ipv4/neigh/*/proxy_delay "
              "/proc/sys/net/ipv6/neigh/*/proxy_delay /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv4/fib_* "
              "/proc/sys/net/ipv6/fib_*; do echo \"$f $(cat $f 2>/dev/null | tr '\\n' ' ')\"; done"])
    out["sysctl"] = p.stdout
    out["nft"] = H.sh(["nsenter", "--net=/run/netns/" + ns, "nft", "list", "ruleset"]).stdout  # anti-spoofing (kernel)
    out["netns"] = sorted(n for n in os.listdir("/run/netns") if n.startswith(fab.prefix + "-" + host.tag + "s"))
    out["pins"] = sorted(p for p in os.listdir(host.bpffs) if not p.endswith(".debug"))  # bpf_preload files
    return out


def diff(a, b):
    return dict((k, (a.get(k), b.get(k))) for k in set(a) | set(b) if a.get(k) != b.get(k))


@pytest.fixture(scope="module")
def fab():
    f = H.Fabric(hosts=("lab-r1-h1", "lab-r1-h2"), tbf=None)
    # a clsact qdisc someone else created must survive removal
    H.sh(["tc", "-n", f.hosts[0].ns, "qdisc", "add", "dev", "eth0", "clsact"])
    try:
        yield f
    finally:
        f.close()


@pytest.mark.parametrize("mode", ["ebpf", "kernel"])
@pytest.mark.parametrize("hostname", ["lab-r1-h1", "lab-r1-h2"])
def test_check_apply_idempotent_remove(fab, mode, hostname):
    host = fab.host(hostname)
    ebpf = mode == "ebpf"
    before = snapshot(fab, host)
    chk = host.core("check", ebpf=ebpf)
    assert len(chk["changes"]) > 20, chk
    assert diff(before, snapshot(fab, host)) == {}, "check mode changed the host"
    assert not os.listdir(os.path.join(host.dir, "state")), "check mode wrote state"
    host.core("apply", ebpf=ebpf)
    assert host.core("apply", ebpf=ebpf)["changes"] == []
    assert host.core("check", ebpf=ebpf)["changes"] == []
    mid = snapshot(fab, host)
    assert mid["netns"] and (mid["pins"] == ["netscale-multinic"]) == ebpf
    # removal: check first (no change), then remove, then nothing left, then a second removal is a no-op
    rc = host.core("remove-check", ebpf=ebpf)["changes"]
    assert rc and diff(mid, snapshot(fab, host)) == {}
    host.core("remove", ebpf=ebpf)
    after = snapshot(fab, host)
    assert _sysdiff(before["sysctl"], after["sysctl"]) == ([], []), "sysctls not restored"
    assert diff(before, after) == {}, "removal left differences"
    assert host.core("remove", ebpf=ebpf)["changes"] == []


def test_bad_input(fab):
    h1, h2 = fab.host("lab-r1-h1"), fab.host("lab-r1-h2")
    before = snapshot(fab, h1)
    # plan of a 4-NIC host on a 2-NIC host: NICs missing
    out = h1.core("apply", host=h2.data, check=False)
    assert "NIC(s) eth2, eth3 of the plan not found" in out["error"], out
    # NIC count differs: an extra fabric-looking NIC
    H.sh(["ip", "-n", h1.ns, "link", "add", "eth2", "type", "veth", "peer", "name", "eth2p"])
    try:
        out = h1.core("apply", check=False)
        assert "the plan has 2 NICs" in out["error"] and "3 matching" in out["error"], out
    finally:
        H.sh(["ip", "-n", h1.ns, "link", "del", "eth2"])
    # no plan for this host
    out = h1.core("apply", host={}, check=False)
    assert "the plan has no entry for this host" in out["error"], out
    # a NIC without a name
    bad = copy.deepcopy(h1.data)
    del bad["nics"][1]["name"]
    out = h1.core("apply", host=bad, check=False)
    assert "nics[1].name" in out["error"], out
    assert diff(before, snapshot(fab, h1)) == {}, "bad input changed the host"
    assert not os.listdir(os.path.join(h1.dir, "state"))


def _sysdiff(a, b):
    la, lb = set(a.splitlines()), set(b.splitlines())
    return sorted(la - lb), sorted(lb - la)
