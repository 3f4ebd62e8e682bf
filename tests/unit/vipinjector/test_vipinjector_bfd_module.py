# -*- coding: utf-8 -*-
"""vipinjector_bfd, the module: files written with mode 0640 and the FRR group, a second run unchanged,
check mode writes nothing, a drifted mode is rewritten without a content diff, absent removes the
directory (check mode keeps it), an unknown group fails before anything is written."""
import grp
import json
import os
import stat

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.modules import vipinjector_bfd

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# a group every host has (the module wants FRR's; the unit test host need not run FRR)
GROUP = grp.getgrgid(os.getegid()).gr_name


@pytest.fixture(scope="module")
def host():
    with open(os.path.join(REPO, "inventories", "lab", "fabric.yml")) as handle:
        topo = load_topology(yaml.safe_load(handle))
    plan = FabricPlan(topo).allocate()
    return dict((h.name, plan.host_data(h)) for h in topo.hosts)["lab-r1-h2"]


def _run(host, tmp_path, capsys, check_mode=False, state="present", group=GROUP, interval_ms=100):
    args = {"host": host, "slot": 1, "group": group, "state": state,
            "options": {"enabled": True, "interval_ms": interval_ms, "config_dir": str(tmp_path / "etc")},
            "_ansible_check_mode": check_mode, "_ansible_diff": True}
    with patch_module_args(args), pytest.raises(SystemExit):
        vipinjector_bfd.main()
    return json.loads(capsys.readouterr().out)


def _files(tmp_path):
    cdir = tmp_path / "etc" / "slot1" / "bfd"
    return cdir, [cdir / "bfdd.conf", cdir / "zebra.conf"]


def test_install_second_run_and_check_mode(host, tmp_path, capsys):
    cdir, paths = _files(tmp_path)
    dry = _run(host, tmp_path, capsys, check_mode=True)
    assert dry["changed"] and dry["files"] == dict((str(p), True) for p in paths)
    assert not cdir.exists(), "check mode created the directory"
    assert [d["after_header"] for d in dry["diff"]] == [str(p) for p in paths]
    assert all(d["before"] == "" and d["after"] for d in dry["diff"])

    first = _run(host, tmp_path, capsys)
    assert first["changed"] and first["files"] == dry["files"] and first["diff"] == dry["diff"]
    assert first["units"] == ["netscale-vipinjector-zebra@1.service", "netscale-vipinjector-bfd@1.service"]
    assert first["config_dir"] == str(cdir) and len(first["peers"]) == 4
    gid = grp.getgrnam(GROUP).gr_gid
    for path in paths:
        st = path.stat()
        assert stat.S_IMODE(st.st_mode) == 0o640
        if os.geteuid() == 0:
            assert (st.st_uid, st.st_gid) == (0, gid)
    assert stat.S_IMODE(cdir.stat().st_mode) == 0o755
    assert sorted(os.listdir(cdir)) == ["bfdd.conf", "zebra.conf"], "a temporary file was left"

    again = _run(host, tmp_path, capsys)
    assert not again["changed"] and "diff" not in again
    assert again["files"] == dict((str(p), False) for p in paths)


def test_changed_content_diff_and_mode_drift(host, tmp_path, capsys):
    cdir, (bfdd, zebra) = _files(tmp_path)
    _run(host, tmp_path, capsys)
    before = bfdd.read_text()
    zebra_text = zebra.read_text()
    dry = _run(host, tmp_path, capsys, check_mode=True, interval_ms=300)
    assert dry["changed"] and dry["files"] == {str(bfdd): True, str(zebra): False}
    assert len(dry["diff"]) == 1 and dry["diff"][0]["before"] == before
    assert "receive-interval 300" in dry["diff"][0]["after"]
    assert bfdd.read_text() == before, "check mode changed the file"
    done = _run(host, tmp_path, capsys, interval_ms=300)
    assert done["changed"] and "receive-interval 300" in bfdd.read_text() and zebra.read_text() == zebra_text

    os.chmod(str(zebra), 0o644)
    drift = _run(host, tmp_path, capsys, interval_ms=300)
    assert drift["changed"] and drift["files"] == {str(bfdd): False, str(zebra): True}
    assert drift["diff"] == [], "a mode change has no content diff"
    assert stat.S_IMODE(zebra.stat().st_mode) == 0o640


def test_absent_removes_the_directory(host, tmp_path, capsys):
    cdir, paths = _files(tmp_path)
    assert not _run(host, tmp_path, capsys, state="absent")["changed"]
    _run(host, tmp_path, capsys)
    dry = _run(host, tmp_path, capsys, state="absent", check_mode=True)
    assert dry["changed"] and dry["files"] == dict((str(p), True) for p in paths)
    assert dry["diff"] == {"before": "%s present\n" % cdir, "after": ""}
    assert cdir.is_dir(), "check mode removed the directory"
    gone = _run(host, tmp_path, capsys, state="absent")
    assert gone["changed"] and not cdir.exists()
    assert not _run(host, tmp_path, capsys, state="absent")["changed"]


def test_unknown_group_fails_before_writing(host, tmp_path, capsys):
    out = _run(host, tmp_path, capsys, group="no-such-group-netscale")
    assert out["failed"] and "group" in out["msg"] and "Fix:" in out["msg"]
    assert not (tmp_path / "etc").exists()
