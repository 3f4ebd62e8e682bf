# -*- coding: utf-8 -*-
"""Check mode, idempotency, removal (host ends exactly as it was), shrink to a smaller shape (host ends as a
fresh deployment at that shape) and bad input, both modes."""
import copy
import json
import os
import re
import struct

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


# ---- shrink / re-shape ---------------------------------------------------------------------------------
def small_shape(data, nics=2, slots=1):
    """The same host planned with fewer NICs and slots (what the planner gives for the lower counts)."""
    out = copy.deepcopy(data)
    out["nics"] = out["nics"][:nics]
    out["slots"] = out["slots"][:slots]
    for s in out["slots"]:
        s["nics"] = s["nics"][:nics]
    out["nic_count"], out["task_slot_count"] = nics, slots
    return out


def _links(ns):
    return json.loads(H.sh(["ip", "-n", ns, "-j", "link", "show"]).stdout)


def shape_dump(fab, host):
    """What the datapath made of the host, normalised only where a fresh deployment must differ:
    interface indexes (veths are new interfaces; NIC indexes stay), veth MAC addresses and the IPv6
    link-local addresses derived from them (not fe80::1, the planned gateway), program ids in tc
    output (a reload gets a new id). BPF maps are dumped decoded, veth indexes and MACs replaced by
    names; mn_stats and mn_spoof are packet counters (the NICs receive ND/MLD), not configuration."""
    slot_ns = sorted(n for n in os.listdir("/run/netns") if n.startswith(fab.prefix + "-" + host.tag + "s"))
    names, macs, lls = {}, {}, {}
    for where in [host.ns] + slot_ns:
        for link in _links(where):
            label = link["ifname"] if where == host.ns else "%s:%s" % (where, link["ifname"])
            names[(where, link["ifindex"])] = label
            if link.get("address") and not (where == host.ns and link["ifname"] in host.nics):
                macs[link["address"]] = "<mac %s>" % label
        for link in json.loads(H.sh(["ip", "-n", where, "-j", "addr", "show"]).stdout):
            for a in link.get("addr_info", []):
                if a["local"].startswith("fe80:") and a["local"] != "fe80::1" and \
                        not (where == host.ns and link["ifname"] in host.nics):
                    lls[a["local"]] = "<ll %s:%s>" % (where, link["ifname"])

    def norm(obj):
        if isinstance(obj, dict):
            return dict((k, norm(v)) for k, v in obj.items()
                        if k not in ("ifindex", "link_index", "link_netnsid", "stats", "stats64", "expires",
                                     "valid_life_time", "preferred_life_time", "operstate", "flags"))
        if isinstance(obj, list):
            return [norm(v) for v in obj]
        if isinstance(obj, str):
            return macs.get(obj) or lls.get(obj.split("/")[0]) or obj
        return obj

    out = {}
    for where in [host.ns] + slot_ns:
        tag = "host" if where == host.ns else where
        for what in (["addr", "show"], ["-4", "route", "show", "table", "all"], ["-6", "route", "show", "table", "all"],
                     ["-4", "rule", "show"], ["-6", "rule", "show"], ["-4", "neigh", "show", "proxy"],
                     ["-6", "neigh", "show", "proxy"]):
            data = json.loads(H.sh(["ip", "-n", where, "-j"] + what).stdout or "[]")
            out["%s %s" % (tag, " ".join(what))] = sorted(json.dumps(norm(d), sort_keys=True) for d in data)
    for link in _links(host.ns):
        dev = link["ifname"]
        out["qdisc " + dev] = sorted(q["kind"] for q in json.loads(
            H.sh(["tc", "-n", host.ns, "-j", "qdisc", "show", "dev", dev]).stdout))
        for direction in ("ingress", "egress"):
            text = H.sh(["tc", "-n", host.ns, "filter", "show", "dev", dev, direction]).stdout
            out["filter %s %s" % (dev, direction)] = re.sub(r"\bid \d+", "id N", text)
    out["netns"] = slot_ns
    out["sysctl"] = snapshot(fab, host)["sysctl"]
    out["nft"] = H.sh(["nsenter", "--net=/run/netns/" + host.ns, "nft", "list", "ruleset"]).stdout
    bpf = H.bpfmod.Bpf(H.bpfmod_runner(), host.bpffs)
    for version in bpf.versions():
        for m in sorted(os.listdir(os.path.join(bpf.vdir(version), "maps"))):
            if m in ("mn_stats", "mn_spoof"):
                continue
            out["map %s" % m] = sorted(_decode_entry(m, k, v, names, macs, host.ns) for k, v in bpf.dump(version, m).items())
    return out


def _decode_entry(name, key, value, names, macs, ns):
    def ifname(raw):
        return names.get((ns, struct.unpack("<I", raw)[0]), "?")

    def mac(raw):
        text = ":".join("%02x" % b for b in raw)
        return macs.get(text, text)
    if name == "mn_veth":
        return (ifname(key[:4]), value.hex())
    if name == "mn_ingress":
        return (ifname(key[:4]), key[4:].hex(), ifname(value[:4]), mac(value[4:10]), mac(value[10:16]))
    if name == "mn_nics":
        return (key.hex(), ifname(value[:4]) if value[:4] != b"\0" * 4 else "-", value[4:].hex())
    return (key.hex(), value.hex())


@pytest.mark.parametrize("mode", ["ebpf", "kernel"])
def test_shrink_equals_fresh_deployment_at_the_smaller_shape(fab, mode):
    """4 NICs / 2 slots shrunk to 2 NICs / 1 slot leaves exactly what a fresh 2/1 deployment makes."""
    host = fab.host("lab-r1-h2")
    ebpf = mode == "ebpf"
    small = small_shape(host.data)
    pattern = "^eth[01]$"   # eth2 and eth3 stay on the host, out of the plan
    # the role adds the NIC addresses on this host (the fixture pre-assigned them): their removal is tested too
    preassigned = [(n["name"], "%s/%s" % (n["address"][f], n["subnet"][f].split("/")[1])) for n in host.data["nics"]
                   for f in ("ipv4", "ipv6")]
    for dev, cidr in preassigned:
        H.sh(["ip", "-n", host.ns, "addr", "del", cidr, "dev", dev])
    try:
        host.core("apply", ebpf=ebpf)
        big = shape_dump(fab, host)
        assert len(big["netns"]) == 2 and ("bpf" in big["filter eth3 ingress"]) == ebpf, big["filter eth3 ingress"]
        chk = host.core("check", ebpf=ebpf, host=small, nic_pattern=pattern)["changes"]
        assert shape_dump(fab, host) == big, "check mode changed the host"
        netns2 = host.netns_names[2]
        for want in ["delete netns %s (slot 2 no longer in the plan)" % netns2, "delete veth ms1-eth3 (no longer in the plan)",
                     "delete rule pref 1101 iif ms1-eth2 lookup 1102",
                     "delete route default table 1103 via %s dev eth3 metric 10" % host.data["nics"][3]["gateway"]["ipv6"],
                     "delete proxy ND %s on eth0" % host.data["slots"][1]["task_ip"]["ipv6"],
                     "delete address %s on eth2 (no longer in the plan)" % preassigned[4][1],
                     "sysctl net.ipv4.neigh.eth3.retrans_time_ms=1000 (restore, NIC no longer in the plan)"] + \
                (["detach program from eth2 (NIC no longer in the plan)",
                  "delete clsact on eth3 (created by this role, NIC no longer in the plan)"] if ebpf else []):
            assert want in chk, (want, chk)
        if ebpf:
            assert any(c.startswith("bpf map entries (") for c in chk), chk
        host.core("apply", ebpf=ebpf, host=small, nic_pattern=pattern)
        assert host.core("apply", ebpf=ebpf, host=small, nic_pattern=pattern)["changes"] == []
        assert host.core("check", ebpf=ebpf, host=small, nic_pattern=pattern)["changes"] == []
        shrunk = shape_dump(fab, host)
        # from scratch at the smaller shape: remove everything, deploy 2 NICs / 1 slot
        host.core("remove", ebpf=ebpf)
        host.core("apply", ebpf=ebpf, host=small, nic_pattern=pattern)
        fresh = shape_dump(fab, host)
        assert fresh["netns"] == [host.netns_names[1]] and fresh["host -4 rule show"]
        assert not ebpf or (fresh["map mn_ingress"] and fresh["map mn_veth"])
        assert _sysdiff(shrunk.pop("sysctl"), fresh.pop("sysctl")) == ([], [])
        differences = diff(shrunk, fresh)
        assert differences == {}, "shrunk host differs from a fresh deployment at the smaller shape: %s" % \
            json.dumps(differences, indent=1)[:6000]
        host.core("remove", ebpf=ebpf)
    finally:
        for dev, cidr in preassigned:
            H.sh(["ip", "-n", host.ns, "addr", "replace", cidr, "dev", dev] + (["nodad"] if ":" in cidr else []),
                 check=False)
