# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""health_gate module against a live ToR (real FRR with the tor_policy config) and real ExaBGP
sidecars of lab-r1-h2 (4 NICs, 2 slots), through ansible-playbook. The ToR runs the ToR policy with BFD
(bgpd + bfdd) and each slot the BFD responder the vipinjector role deploys, so nics_in_service reads the
ToR's BFD sessions. Asserts verdicts and the values behind them; then cuts NIC eth2 of slot 1 on the ToR
side and asserts the gates fail naming it. Needs root; fails (never skips) without."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import yaml

from labkit.mnv_harness import sh
from mnr_harness import MnrHarness

pytestmark = pytest.mark.e2e
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="module")
def hx(request):
    if os.geteuid() != 0:
        pytest.fail("the rollout gate e2e tests need root (network namespaces, FRR, ExaBGP)")
    h = MnrHarness(slots=(1, 2), tag="g%x" % (os.getpid() & 0xFFF), md5="mnr-gate-key")
    request.addfinalizer(h.close)
    h.build()
    h.start_frr(bgpd_conf=h.policy_config(bfd={"enabled": True}), bfdd=True)
    h.settle()
    for s in (1, 2):
        h.write_instance(s)
        h.start_exabgp(s)
    for s in (1, 2):
        h.wait_width(h.task_ip(s), 4, timeout=20)
        h.wait_width(h.task_ip(s, "ipv6"), 4, timeout=10)
        h.start_bfd_responder(s)
    return h


def run_gates(h, tmpdir, count=5):
    out = os.path.join(str(tmpdir), "gates.json")
    gates = [{"name": g, "netscale.multinic.health_gate": dict(
        gate=g, hosts=["{{ h }}"], vtysh="{{ vt }}", runtime_dir="{{ rt }}", count=count,
        failure_limit=count - 1, success_threshold=2, interval=0.5, fail_on=[]), "register": "r_" + g}
        for g in ("bgp_sessions", "ecmp_width", "sidecars")]
    # nics_in_service on the ToR: the BFD session of every slot on every NIC
    gates.append({"name": "nics_in_service", "netscale.multinic.health_gate": dict(
        gate="nics_in_service", source="frr", hosts=["{{ h }}"], vtysh="{{ vt }}", count=count,
        failure_limit=count - 1, success_threshold=2, interval=0.5, fail_on=[]), "register": "r_nics_in_service"})
    names = ("bgp_sessions", "ecmp_width", "sidecars", "nics_in_service")
    save = {"name": "save", "ansible.builtin.copy": {
        "content": "{{ {%s} | to_json }}" % ", ".join("'%s': r_%s" % (g, g) for g in names), "dest": out}}
    play = [{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": {"h": h.host, "vt": h.vtysh_argv(), "rt": h.runtime_dir()},
        "tasks": gates + [save],
    }]
    pb = os.path.join(str(tmpdir), "gates.yml")
    with open(pb, "w") as f:
        yaml.safe_dump(play, f)
    env = dict(os.environ, PATH=os.path.join(REPO, ".venv", "bin") + os.pathsep + os.environ["PATH"],
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    r = subprocess.run(["ansible-playbook", "-i", "localhost,", "-e", "ansible_python_interpreter=/usr/bin/python3",
                        pb], cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    with open(out) as f:
        return json.load(f)


def test_gates_pass_then_fail_on_nic_cut(hx, tmp_path):
    res = run_gates(hx, tmp_path)
    assert res["bgp_sessions"]["verdict"] == "pass", res["bgp_sessions"]["reason"]
    assert (res["bgp_sessions"]["values"]["established"], res["bgp_sessions"]["values"]["expected"]) == (8, 8)
    assert res["ecmp_width"]["verdict"] == "pass" and res["ecmp_width"]["values"]["at_width"] == 4
    assert res["sidecars"]["verdict"] == "pass" and res["sidecars"]["values"]["healthy"] == 2
    assert res["ecmp_width"]["seconds"] < 5      # passes after 2 consecutive measurements
    nis = res["nics_in_service"]
    assert nis["verdict"] == "pass", nis["reason"]
    assert (nis["values"]["in_service"], nis["values"]["nics"], nis["values"]["bfd_up"], nis["values"]["bfd_sessions"]) \
        == (4, 4, 8, 8)

    sh(["ip", "-n", hx.tor, "link", "set", hx.tor_port(1, 2), "down"])
    t0 = time.monotonic()
    # the ToR port sits in a bridge that keeps its carrier: BFD or the hold timer takes the session down
    hx.wait_width(hx.task_ip(1), 3, timeout=20)
    detected = time.monotonic() - t0
    time.sleep(1.0)
    res = run_gates(hx, tmp_path, count=4)
    assert res["bgp_sessions"]["verdict"] == "fail"
    bad = res["bgp_sessions"]["values"]["detail"]
    assert [(d["slot"], d["nic"]) for d in bad] == [(1, "eth2")]
    assert res["ecmp_width"]["verdict"] == "fail"
    assert sorted(d["prefix"] for d in res["ecmp_width"]["values"]["detail"]) == ["198.18.0.136/32", "fd00:10:0:8::8/128"]
    assert all(d["width"] == 3 for d in res["ecmp_width"]["values"]["detail"])
    assert res["sidecars"]["verdict"] == "fail"
    assert res["sidecars"]["values"]["detail"][0]["slot"] == 1
    nis = res["nics_in_service"]
    assert nis["verdict"] == "fail" and nis["values"]["in_service"] == 3
    slot1_nic2 = [n for n in hx.host["slots"][0]["nics"] if n["index"] == 2][0]["address"]["ipv6"]
    assert [(d["nic"], d["reasons"]) for d in nis["values"]["detail"]] == \
        [("eth2", ["BFD session of slot 1 (ToR peer %s) down" % slot1_nic2])]
    print("ToR width 4->3 after %.1f s; gates decided %.1f s after the cut" % (detected, time.monotonic() - t0))
