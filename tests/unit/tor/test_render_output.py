# -*- coding: utf-8 -*-
"""tor_render's core: every device rendered into intended/ one at a time (tor_policy.output), in one
process or in forked workers, against the files the action wrote before it streamed (all configs built,
then each structured config dumped by PyYAML)."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
import yaml

from ansible_collections.netscale.multinic.plugins.module_utils import tor_policy
from ansible_collections.netscale.multinic.plugins.module_utils.frr.key_placeholders import with_placeholders
from ansible_collections.netscale.multinic.plugins.module_utils.plan.planner import FabricPlan
from ansible_collections.netscale.multinic.plugins.module_utils.plan.topology import load_topology
from ansible_collections.netscale.multinic.plugins.module_utils.tor_policy import output
from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact
from ansible_collections.netscale.multinic.plugins.module_utils.yamlblock import pyyaml_dump

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KEYS = {"lab-r1-h1": "k-one", "lab-r2-h2": "k-two", "lab-spine1": "spine-key"}


def plan_of(fabric, mutate=None):
    with open(os.path.join(REPO, "inventories", fabric, "fabric.yml")) as fh:
        data = yaml.safe_load(fh)
    if mutate:
        mutate(data)
    return FabricPlan(load_topology(data)).allocate()


def reference(plan, options, keys):
    """{relative path: (text, mode)} and {device: summary} as the action made them before streaming."""
    files, summaries = {}, {}
    for name, cfg in sorted(tor_policy.build_fabric_configs(plan, options, keys).items()):
        on_disk, names = with_placeholders(cfg["text"], keys)
        files["configs/%s.cfg" % name] = (on_disk, 0o600)
        files["structured_configs/%s.yml" % name] = (pyyaml_dump(redact(cfg["structured"])), 0o644)
        sc = cfg["structured"]
        summaries[name] = {"kind": cfg["kind"], "platform": sc["platform"], "counts": sc["counts"],
                           "sha256": hashlib.sha256(redact(cfg["text"]).encode()).hexdigest(),
                           "sysctls": (sc.get("ecmp_hash") or {}).get("sysctls", {}),
                           "live": bool(sc["capabilities"].get("live")), "md5_names": names}
    return files, summaries


def tree(dest):
    out = {}
    for folder, _dirs, names in os.walk(dest):
        for name in names:
            path = os.path.join(folder, name)
            with open(path) as fh:
                out[os.path.relpath(path, dest)] = (fh.read(), stat.S_IMODE(os.stat(path).st_mode))
    return out


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("fabric,options,keys", [
    ("lab", {"md5": "required", "uplink_md5": "optional", "bfd": {"enabled": True}},
     dict(KEYS, **{"lab-r1-h2": "k-1-2", "lab-r2-h1": "k-2-1"})),
    ("example", {}, {}),
])
def test_same_files_and_summaries_as_before_streaming(tmp_path, fabric, options, keys, workers):
    plan = plan_of(fabric)
    dest = str(tmp_path / "intended")
    written, summaries = output.render_fabric(plan, dest, options, keys, workers=workers)
    files, want = reference(plan, options, keys)
    assert tree(dest) == files
    assert written == [os.path.join(dest, rel) for name in sorted(want)
                       for rel in ("configs/%s.cfg" % name, "structured_configs/%s.yml" % name)]
    assert list(summaries) == sorted(want)
    for name, summary in summaries.items():
        assert summary["config"] == os.path.join(dest, "configs", name + ".cfg")
        assert summary["structured_config"] == os.path.join(dest, "structured_configs", name + ".yml")
        assert dict((k, v) for k, v in summary.items() if k not in ("config", "structured_config")) == want[name]
    # a second run writes nothing, and so does a check-mode run
    assert output.render_fabric(plan, dest, options, keys, workers=workers)[0] == []
    assert output.render_fabric(plan, dest, options, keys, check_mode=True, workers=workers)[0] == []


@pytest.mark.parametrize("workers", [1, 2])
def test_changed_content_or_mode_is_rewritten_and_check_mode_only_reports(tmp_path, workers):
    plan = plan_of("lab")
    dest = str(tmp_path)
    output.render_fabric(plan, dest, {}, {}, workers=workers)
    before = tree(dest)
    cfg = os.path.join(dest, "configs", "lab-r1-tor.cfg")
    sc = os.path.join(dest, "structured_configs", "lab-spine1.yml")
    with open(cfg, "a") as fh:
        fh.write("! local edit\n")
    os.chmod(sc, 0o666)
    same_size = os.path.join(dest, "structured_configs", "lab-r2-tor.yml")
    with open(same_size) as fh:
        text = fh.read()
    with open(same_size, "w") as fh:   # same size, other content: must be read to be seen
        fh.write(text[:-2] + "x\n")
    edited = tree(dest)
    written, _summaries = output.render_fabric(plan, dest, {}, {}, check_mode=True, workers=workers)
    assert written == [cfg, same_size, sc]
    assert tree(dest) == edited
    written, _summaries = output.render_fabric(plan, dest, {}, {}, workers=workers)
    assert written == [cfg, same_size, sc]
    assert tree(dest) == before


@pytest.mark.parametrize("workers", [1, 2])
def test_bad_input_lists_every_device_problem_in_order_and_writes_nothing(tmp_path, workers):
    plan = plan_of("lab")
    dest = str(tmp_path)
    output.render_fabric(plan, dest, {}, {}, workers=workers)
    before = tree(dest)
    with pytest.raises(tor_policy.TorPolicyError) as err:
        output.render_fabric(plan, dest, {"md5": "required", "uplink_md5": "required"}, {"lab-r1-h1": "new-key"},
                             workers=workers)
    one = tor_policy.TorPolicyError([])
    with pytest.raises(tor_policy.TorPolicyError) as ref:
        tor_policy.build_fabric_configs(plan, {"md5": "required", "uplink_md5": "required"}, {"lab-r1-h1": "new-key"})
    assert [p.as_dict() for p in err.value.problems] == [p.as_dict() for p in ref.value.problems] != one.problems
    assert tree(dest) == before   # no file changed, no temporary file left
    fresh = str(tmp_path / "fresh")
    with pytest.raises(tor_policy.TorPolicyError):
        # lab-r1 renders (its files staged), lab-r2 has hosts without a key
        output.render_fabric(plan, fresh, {"md5": "required"}, {"lab-r1-h1": "k1", "lab-r1-h2": "k2"}, workers=workers)
    assert not os.path.exists(fresh)


def test_unknown_device_is_refused_and_named(tmp_path):
    with pytest.raises(tor_policy.TorPolicyError) as err:
        output.render_fabric(plan_of("lab"), str(tmp_path), {}, {}, devices=["lab-r1-tor", "nope-tor"])
    assert [p.path for p in err.value.problems] == ["devices"]
    assert err.value.problems[0].value == ["nope-tor"]
    assert not os.listdir(str(tmp_path))


def test_named_devices_only(tmp_path):
    written, summaries = output.render_fabric(plan_of("lab"), str(tmp_path), {}, {}, devices=["lab-spine1", "lab-r2-tor"])
    assert list(summaries) == ["lab-r2-tor", "lab-spine1"]
    assert len(written) == 4


def test_a_worker_that_fails_leaves_nothing_behind(tmp_path, monkeypatch):
    plan = plan_of("lab")
    dest = str(tmp_path)
    real = output.render

    def failing(sc):
        if sc["name"] == "lab-spine1":
            raise ValueError("template blew up")
        return real(sc)

    monkeypatch.setattr(output, "render", failing)
    with pytest.raises(RuntimeError, match="template blew up"):
        output.render_fabric(plan, dest, {}, {}, workers=2)
    # the other worker's staged files are removed: nothing renamed, no temporary file
    assert [f for _b, _d, names in os.walk(dest) for f in names] == []


def test_default_workers_none_for_a_small_fabric():
    assert output.default_workers(0) == 1
    assert output.default_workers(output.MIN_DEVICES_PER_WORKER - 1) == 1
    assert 1 <= output.default_workers(10 ** 6) <= (os.cpu_count() or 1)


def test_file_differs(tmp_path):
    path = str(tmp_path / "f")
    assert output.file_differs(path, "a\n", 0o644)
    with open(path, "w") as fh:
        fh.write("a\n")
    os.chmod(path, 0o644)
    assert not output.file_differs(path, "a\n", 0o644)
    assert output.file_differs(path, "a\n", 0o600)
    assert output.file_differs(path, "b\n", 0o644)
    assert output.file_differs(path, "ab\n", 0o644)
    assert output.file_differs(path, "\u00e9\n", 0o644)
