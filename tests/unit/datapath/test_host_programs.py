"""The programs that run on hosts: the committed role files are what scripts/build-host-programs.py builds
from plugins/module_utils, and they run on a bare python3 (no site-packages, so no Ansible)."""
import importlib.util
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import watcher
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.vipinjector import render

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("build_host_programs",
                                               os.path.join(REPO, "scripts", "build-host-programs.py"))
host_programs = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = host_programs   # dataclasses look their module up there
_SPEC.loader.exec_module(host_programs)
HELPER = os.path.join(REPO, "roles", "vipinjector", "files", "vipinjector-helper")
WATCHER = os.path.join(REPO, "roles", "host_datapath", "files", "netscale-multinic-watcher.py")
# the hosts' interpreter when present (Debian 12), else this one; -I -S: nothing but the stdlib
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _run(*argv):
    return subprocess.run([PYTHON, "-I", "-S"] + list(argv), capture_output=True, text=True, check=False)


def test_role_files_are_up_to_date():
    assert host_programs.out_of_date() == [], "run: .venv/bin/python scripts/build-host-programs.py"


def test_bundles_list_what_they_import():
    assert host_programs.bundled_modules("vipinjector.sidecar") == [
        "vipinjector", "drain_marker", "errors", "writing", "vipinjector.guard", "vipinjector.sidecar"]
    assert host_programs.bundled_modules("datapath.watcher") == [
        "datapath", "datapath.bfdstate", "datapath.health", "datapath.localmap", "drain_marker", "writing",
        "datapath.watcher"]


@pytest.mark.parametrize("program", [HELPER, WATCHER])
def test_programs_start_without_ansible(program):
    result = _run(program, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


@pytest.fixture(scope="module")
def rendered():
    with open(os.path.join(REPO, "inventories", "lab", "fabric.yml")) as handle:
        topo = load_topology(yaml.safe_load(handle))
    plan = FabricPlan(topo).allocate()
    host = dict((h.name, plan.host_data(h)) for h in topo.hosts)["lab-r1-h2"]
    return render.render_instance(host, 1, {"md5_password": "k#ey-1", "health": {"type": "none"}})


def test_helper_guard_runs_from_the_bundle(rendered, tmp_path):
    (tmp_path / "helper.json").write_text(rendered["files"]["helper.json"])
    (tmp_path / "clean.conf").write_text(rendered["files"]["exabgp.conf"])
    foreign = rendered["files"]["exabgp.conf"].replace(
        "    inherit vipinjector;\n", "    inherit vipinjector;\n    route 198.18.0.8/32 next-hop self;\n", 1)
    (tmp_path / "foreign.conf").write_text(foreign)
    clean = _run(HELPER, "--config", str(tmp_path / "helper.json"), "--check-config", str(tmp_path / "clean.conf"))
    assert clean.returncode == 0, clean.stderr
    refused = _run(HELPER, "--config", str(tmp_path / "helper.json"), "--check-config", str(tmp_path / "foreign.conf"))
    assert refused.returncode == 1 and "REFUSED" in refused.stderr


def test_watcher_reapply_batches_split_sysctls_and_families():
    runtime = {"devices": {
        "eth1": [["sysctl", "net.ipv6.conf.eth1.proxy_ndp", "1"], ["-6", "neigh", "replace", "proxy", "fd00::8", "dev", "eth1"]],
        "eth0": [["-4", "route", "replace", "198.18.0.8/32", "dev", "eth0"], ["link", "set", "eth0", "up"]],
    }}
    sysctls, batches = watcher.reapply_batches(runtime)
    assert sysctls == [("net.ipv6.conf.eth1.proxy_ndp", "1")]
    assert batches == {"-4": ["route replace 198.18.0.8/32 dev eth0"], "": ["link set eth0 up"],
                       "-6": ["neigh replace proxy fd00::8 dev eth1"]}
    assert watcher.reapply_batches(runtime, ["eth0"])[0] == []
