# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""fabric_drain module (host side): marker written atomically, check mode and diff, idempotency, the watcher's
confirmation (and its absence), refusals before any change."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.netscale.multinic.plugins.module_utils import drain_marker as MK
from ansible_collections.netscale.multinic.plugins.modules import fabric_drain


def run(capsys, check_mode=False, diff=False, **args):
    args["_ansible_check_mode"] = check_mode
    args["_ansible_diff"] = diff
    with patch_module_args(args), pytest.raises(SystemExit):
        fabric_drain.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def host(tmp_path):
    rt = tmp_path / "runtime.json"
    rt.write_text(json.dumps({"devices": {}, "detect": {"nics": [{"name": "eth%d" % i, "index": i} for i in range(4)]}}))
    paths = {"runtime": str(rt), "marker": str(tmp_path / "admin-drain.json"),
             "egress_state": str(tmp_path / "egress-state.json"), "watcher_unit": "", "timeout": 3.0}
    return paths


def fake_watcher(paths, stop):
    """What the NIC watcher does with the marker: publish the drained NICs (every 50 ms here)."""
    while not stop.is_set():
        nics, dummy, dummy2 = MK.parse(MK.read(paths["marker"]))
        st = {"version": 1, "out": sorted(nics), "out_nics": ["eth%d" % i for i in sorted(nics)],
              "updated": time.time()}
        if nics:
            st["drained"] = sorted(nics)
        with open(paths["egress_state"] + ".tmp", "w") as f:
            json.dump(st, f)
        os.replace(paths["egress_state"] + ".tmp", paths["egress_state"])
        time.sleep(0.05)


@pytest.fixture
def watcher(host):
    stop = threading.Event()
    t = threading.Thread(target=fake_watcher, args=(host, stop), daemon=True)
    t.start()
    yield
    stop.set()
    t.join()


def test_drain_check_diff_idempotent_and_undrain(capsys, host, watcher):
    dry = run(capsys, check_mode=True, diff=True, scope="nic", nic=1, reason="loss", **host)
    assert dry["changed"] and not os.path.exists(host["marker"])
    assert dry["diff"]["before"] == "" and '"1"' in dry["diff"]["after"] and dry["in_service"] == 3
    res = run(capsys, scope="nic", nic=1, reason="loss", job="j1", **host)
    assert res["changed"] and res["drained_nics"] == [1] and res["egress"]["drained"] == [1]
    assert res["confirmed_after"] < 3.0
    doc = json.load(open(host["marker"]))
    assert doc["nics"]["1"]["reason"] == "loss" and doc["nics"]["1"]["job"] == "j1"
    assert oct(os.stat(host["marker"]).st_mode & 0o777) == "0o644"
    again = run(capsys, scope="nic", nic=1, reason="other", **host)
    assert not again["changed"] and json.load(open(host["marker"])) == doc
    hostwide = run(capsys, scope="host", **host)
    assert hostwide["changed"] and hostwide["host_drained"] and hostwide["in_service"] == 0
    run(capsys, scope="host", state="undrained", **host)
    back = run(capsys, scope="nic", nic=1, state="undrained", **host)
    assert back["changed"] and back["drained_nics"] == [] and not os.path.exists(host["marker"])
    assert "drained" not in back["egress"]
    assert not run(capsys, scope="nic", nic=1, state="undrained", **host)["changed"]


def test_no_confirmation_fails_and_says_so(capsys, host):
    res = run(capsys, scope="nic", nic=2, **dict(host, timeout=0.3))
    assert res["failed"] and "did not confirm" in res["msg"] and "the marker stays as written" in res["msg"]
    assert MK.parse(MK.read(host["marker"]))[0] == {2}


@pytest.mark.parametrize("change,msg", [
    ({"nic": 9}, "nic=9: the host's NICs are [0, 1, 2, 3]"),
    ({"runtime": "/nonexistent"}, "no gray-failure detection on this host"),
])
def test_refused_before_any_change(capsys, host, change, msg):
    res = run(capsys, scope="nic", **dict(dict(host, nic=1), **change))
    assert res["failed"] and msg in res["msg"] and "nothing was changed" in res["msg"]
    assert not os.path.exists(host["marker"])


def test_garbage_marker_is_not_overwritten(capsys, host):
    with open(host["marker"], "w") as f:
        f.write("{garbage")
    res = run(capsys, scope="host", **host)
    assert res["failed"] and "is not a drain marker" in res["msg"]
    assert open(host["marker"]).read() == "{garbage"
