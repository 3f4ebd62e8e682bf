# -*- coding: utf-8 -*-
"""The relaxed detection timers of the test fabrics (inventories/lab/shared/relaxed_timers.yml) differ from the
lab's own settings (inventories/lab/group_vars/all/lab.yml) in interval_ms and nothing else, and every fabric
that links them reads them after lab.yml."""

from __future__ import annotations

import copy
import os

import yaml

from labkit.lab_vars import RELAXED_TIMERS, SHARED, link_group_vars

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LINKED_IN_GIT = ("molecule/canary_failure/inventory/group_vars/all", "molecule/nic_failure/inventory/group_vars/all",
                 "tests/e2e/rollout/group_vars/all")


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def _with_interval(value, interval):
    """``value`` with every interval_ms replaced by ``interval``."""
    if isinstance(value, dict):
        return dict((k, interval if k == "interval_ms" else _with_interval(v, interval)) for k, v in value.items())
    return copy.deepcopy(value)


def test_only_the_intervals_differ_from_the_lab_settings():
    relaxed, lab = _load(RELAXED_TIMERS), _load(os.path.join(SHARED, "lab.yml"))
    assert set(relaxed) == {"tor_bgp_options", "vipinjector_bfd", "host_datapath_detection"}
    for name, value in relaxed.items():
        assert value == _with_interval(lab[name], 300), name
        assert lab[name] != value, "%s: lab.yml has the relaxed timers already" % name


def test_fabrics_in_git_link_the_file_after_lab_yml():
    for folder in LINKED_IN_GIT:
        path = os.path.join(REPO, folder)
        names = sorted(os.listdir(path))
        assert "lab.yml" in names and "relaxed_timers.yml" in names, (folder, names)
        # Ansible reads a group_vars directory's files in name order: the later file's top-level keys win
        assert names.index("relaxed_timers.yml") > names.index("lab.yml"), names
        assert os.path.samefile(os.path.join(path, "relaxed_timers.yml"), RELAXED_TIMERS), folder


def test_link_group_vars_of_a_fabric_written_at_run_time(tmp_path):
    gv = link_group_vars(tmp_path)
    assert sorted(os.listdir(gv)) == ["lab.yml", "relaxed_timers.yml", "vault.yml"]
    assert link_group_vars(tmp_path) == gv   # links already there are kept
    plain = link_group_vars(tmp_path / "fifty", relaxed_timers=False, monitoring_port=20990)
    assert sorted(os.listdir(plain)) == ["lab.yml", "monitoring.yml", "vault.yml"]
    assert _load(os.path.join(plain, "monitoring.yml")) == {"lab_monitoring_port": 20990}


def test_link_group_vars_turns_the_monitoring_off_for_a_fabric_that_never_reads_it(tmp_path):
    off = link_group_vars(tmp_path / "off", monitoring_port=20990, monitoring=False)
    assert _load(os.path.join(off, "monitoring.yml")) == {"lab_monitoring": False, "lab_monitoring_port": 20990}
    assert _load(os.path.join(link_group_vars(tmp_path / "bare", monitoring=False), "monitoring.yml")) == {
        "lab_monitoring": False}
    # the monitoring.yml Ansible reads sorts after lab.yml (which turns it on), so it wins
    assert sorted(os.listdir(off)).index("monitoring.yml") > sorted(os.listdir(off)).index("lab.yml")
