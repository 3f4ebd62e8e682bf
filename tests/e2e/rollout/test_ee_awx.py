# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment definition builds a context with ansible-builder, and the AWX and
rollout playbooks pass ansible-playbook --syntax-check."""

from __future__ import annotations

import os
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.path.join(REPO, ".venv", "bin")


def _run(argv, **kw):
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False, **kw)


def test_ansible_builder_create():
    r = _run(["bash", "awx/build-ee.sh"], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    ctx = os.path.join(REPO, ".cache", "ee", "context")
    cf = open(os.path.join(ctx, "Containerfile")).read()
    assert "ansible-galaxy collection install --offline /tmp/netscale-multinic.tar.gz" in cf
    assert os.path.getsize(os.path.join(ctx, "_build", "collections", "netscale-multinic.tar.gz")) > 10000
    reqs = open(os.path.join(ctx, "_build", "requirements.txt")).read()
    assert "ansible==" in reqs
    assert "clang" in open(os.path.join(ctx, "_build", "bindep.txt")).read()


def test_awx_and_rollout_playbooks_syntax():
    for pb, inv in (("awx/configure.yml", None), ("playbooks/rollout.yml", "inventories/lab/fabric.yml"),
                    ("playbooks/rollout.yml", "inventories/example/fabric.yml")):
        argv = ["ansible-playbook", "--syntax-check", pb] + (["-i", inv] if inv else [])
        r = _run(argv, timeout=300)
        assert r.returncode == 0, "%s: %s%s" % (pb, r.stdout, r.stderr)
