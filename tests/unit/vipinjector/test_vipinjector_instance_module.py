"""vipinjector_instance: files written with their modes, and on a key rotation the diff shows
neither the old nor the new MD5 key."""
import json
import os

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args

from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.modules import vipinjector_instance

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="module")
def host():
    with open(os.path.join(REPO, "inventories", "lab", "fabric.yml")) as handle:
        topo = load_topology(yaml.safe_load(handle))
    plan = FabricPlan(topo).allocate()
    return dict((h.name, plan.host_data(h)) for h in topo.hosts)["lab-r1-h2"]


def _run(host, tmp_path, key, capsys, check_mode=False):
    args = {"host": host, "slot": 1, "md5_password": key, "validate": False,
            "options": {"install_dir": str(tmp_path / "inst"), "config_dir": str(tmp_path / "etc"),
                        "runtime_dir": str(tmp_path / "run"), "health": {"type": "none"}},
            "_ansible_check_mode": check_mode, "_ansible_diff": True}
    with patch_module_args(args), pytest.raises(SystemExit):
        vipinjector_instance.main()
    return json.loads(capsys.readouterr().out)


def test_key_rotation_diff_hides_old_and_new_key(host, tmp_path, capsys):
    first = _run(host, tmp_path, "old-key-1", capsys)
    assert first["changed"]
    conf = tmp_path / "etc" / "slot1" / "exabgp.conf"
    assert "old-key-1" in conf.read_text() and (conf.stat().st_mode & 0o7777) == 0o600
    assert (tmp_path / "etc" / "slot1" / "helper.json").stat().st_mode & 0o7777 == 0o644
    rotated = _run(host, tmp_path, "new-key-2", capsys, check_mode=True)
    assert rotated["changed"]
    text = json.dumps(rotated)
    assert "old-key-1" not in text and "new-key-2" not in text
    assert "<redacted>" in text
    assert "old-key-1" in conf.read_text(), "check mode changed the file"
    assert not _run(host, tmp_path, "old-key-1", capsys)["changed"]
