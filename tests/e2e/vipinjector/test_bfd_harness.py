# -*- coding: utf-8 -*-
"""BFD on every host session (issue 12 item 1), live on the mnv harness: the ToR runs the ToR policy's
FRR config with BFD on (bgpd + bfdd, profile 100 ms x 3, check-control-plane-failure), the slot runs
the sidecar (ExaBGP + helper) and the host-side responder the vipinjector role deploys (zebra + bfdd in
the slot's namespace, configuration from vipinjector.bfd). Assertions on observed state only: BFD
peers on both ends, the ToR's BGP neighbors and its kernel FIB. Times: bench/vipinjector_bfd.py.

The same harness then rolls the ToR back to its pre-BFD copy the way the rollout's ToR restore does
(frr_apply.converge, i.e. frr-reload.py): FRR 8.4 used to re-enable BFD on the way out ("running
config did not converge: no bfd", see frr_apply.bfd_options_first)."""

from __future__ import annotations

import os
import re

import pytest

from labkit.mnv_harness import Harness, sh

from ansible_collections.netscale.multinic.plugins.module_utils.frr import apply as frr_apply

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _need_root():
    if os.geteuid() != 0:
        pytest.fail("the vipinjector e2e tests need root (network namespaces, FRR)")


@pytest.fixture
def hb(request):
    h = Harness(tag="b%x" % (abs(hash(request.node.name)) & 0xFFF), md5="mnv-bfd-key")
    request.addfinalizer(h.close)
    h.build()
    h.start_frr(bgpd_conf=h.policy_config(bfd={"enabled": True}), bfdd=True)
    h.settle()
    return h


def _wait(pred, timeout, poll=0.05):
    import time
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return True
        time.sleep(poll)
    return False


def _drop_port(h, port, table):
    """Silent loss on a ToR port: nftables netdev ingress and egress chains, policy drop (carrier stays up)."""
    sh(["ip", "netns", "exec", h.tor, "nft",
        "add table netdev %s; "
        "add chain netdev %s in { type filter hook ingress device \"%s\" priority -500; policy drop; }; "
        "add chain netdev %s out { type filter hook egress device \"%s\" priority -500; policy drop; }"
        % (table, table, port, table, port)])


def test_bfd_up_on_every_session_silent_loss_drops_that_next_hop_and_pre_bfd_restore_converges(hb):
    h = hb
    sd = [s for s in h.host["slots"] if s["slot"] == 1][0]
    containers = dict((n["index"], n["address"]["ipv6"]) for n in sd["nics"])
    gateways = dict((n["index"], n["gateway"]["ipv6"]) for n in h.host["nics"])
    h.write_instance(1)
    h.start_exabgp(1)
    v4, v6 = h.task_ip(1), h.task_ip(1, "ipv6")
    h.wait_width(v4, 4, timeout=15)
    h.wait_width(v6, 4, timeout=5)
    h.start_bfd_responder(1)

    def tor_up():
        peers = h.bfd_peers()
        return all(peers.get(a, {}).get("status") == "up" for a in containers.values())
    assert _wait(tor_up, 15), h.bfd_peers()
    tor, host = h.bfd_peers(), h.bfd_peers(1)
    for k, addr in containers.items():
        p = tor[addr]
        # the ToR's session of BGP neighbor (slot 1, NIC k): same two addresses, single hop, profile timers,
        # and the far end answering with the same timers
        assert (p["local"], p["multihop"], p["interface"]) == (gateways[k], False, h.tor_port(1, k)), p
        assert (p["receive-interval"], p["transmit-interval"], p["detect-multiplier"]) == (100, 100, 3), p
        assert (p["remote-receive-interval"], p["remote-transmit-interval"], p["remote-detect-multiplier"]) \
            == (100, 100, 3), p
        q = host[gateways[k]]
        assert (q["status"], q["local"], q["interface"], q["multihop"]) == ("up", addr, "eth%d" % k, False), q
    assert all(h.session_states()[a] == "Established" for a in containers.values())

    # Silent loss on NIC 1's ToR port (carrier up, every frame dropped both ways)
    port, nh1 = h.tor_port(1, 1), sd["nics"][1]["address"]["ipv4"]
    _drop_port(h, port, "mnvloss")
    try:
        assert _wait(lambda: len(h.fib_nexthops(v4)) == 3 and len(h.fib_nexthops(v6)) == 3, 20, poll=0.01), \
            h.fib_nexthops(v4)
        assert nh1 not in h.fib_nexthops(v4)
        # it was BFD, not the hold timer: the ToR's BFD peer is down, and bgpd reset that neighbor for it
        # (FRR sends a Cease "BFD Down" notification; the hold timer would read "Hold Timer Expired")
        p = h.bfd_peers()[containers[1]]
        assert p["status"] == "down" and p["diagnostic"] == "control detection time expired", p
        nb = h.vtysh("show bgp neighbors %s json" % containers[1])[containers[1]]
        assert nb["bgpState"] != "Established" and nb.get("lastNotificationReason") == "Cease/BFD Down", \
            dict((k, v) for k, v in nb.items() if "eset" in k or "otif" in k or "bfd" in k.lower() or k == "bgpState")
        # the other three sessions: BFD up, Established, still next hops
        tor = h.bfd_peers()
        states = h.session_states()
        for k in (0, 2, 3):
            assert tor[containers[k]]["status"] == "up" and states[containers[k]] == "Established"
    finally:
        sh(["ip", "netns", "exec", h.tor, "nft", "delete table netdev mnvloss"], check=False)
    # loss gone: BFD up again, the session back, full width
    assert _wait(tor_up, 20), h.bfd_peers()
    h.wait_width(v4, 4, timeout=20)
    h.wait_width(v6, 4, timeout=5)

    # Rollback to the pre-BFD copy (rollout ToR restore: frr_config -> frr_apply.converge, i.e. frr_apply.apply)
    # with the sessions up. frr-reload.py needs the integrated config mode and every daemon the config names
    # (staticd: blackholes). The harness's per-daemon files give zebra the ToR's hostname and the other daemons
    # the machine's, which vtysh cannot align: hostname lines are left out of the comparison (an integrated
    # config has one hostname).
    with open(os.path.join(h.frr_dir, "vtysh.conf"), "w") as f:
        f.write("service integrated-vtysh-config\n")
    h._frr_daemon(h.tor, h.frr_dir, "staticd", "/dev/null")
    target = frr_apply.FrrTarget(confdir=h.frr_dir, vty_socket=h.frr_dir, rundir=h.frr_dir)
    cand = os.path.join(h.frr_dir, "candidate.conf")

    def run(argv):
        r = sh(["ip", "netns", "exec", h.tor] + list(argv), check=False)
        return r.returncode, r.stdout, r.stderr

    def delta(text):
        with open(cand, "w") as f:
            f.write(text)
        dels, adds = frr_apply.delta(run, target, cand)
        return [ln for ln in dels + adds if "hostname" not in ln], dels

    def restore(text):
        diff, dels = delta(text)
        left, dummy = frr_apply.apply(run, target, cand, dels)
        return diff, [ln for ln in left[0] + left[1] if "hostname" not in ln]
    pre_bfd, with_bfd = h.policy_config(), h.policy_config(bfd={"enabled": True})
    diff, left = restore(pre_bfd)
    assert any("bfd" in ln for ln in diff) and left == [], (diff, left)
    running = h.vtysh("show running-config", js=False)
    assert not [ln for ln in running.splitlines() if re.search(r"(^|\s)bfd(\s|$)", ln)], running
    assert h.bfd_peers() == {}
    states = h.session_states()
    assert all(states[a] == "Established" for a in containers.values()), states   # no session reset
    assert len(h.fib_nexthops(v4)) == 4 and len(h.fib_nexthops(v6)) == 4
    assert delta(pre_bfd)[0] == []
    # and forward again: the BFD policy comes back up on every session
    diff, left = restore(with_bfd)
    assert diff and left == [], (diff, left)
    assert _wait(tor_up, 20), h.bfd_peers()
    assert delta(with_bfd)[0] == []
