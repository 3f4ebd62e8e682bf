"""A fabric topology that fails to parse, used as the inventory, fails every playbook of the collection
(rc != 0, its problems in the output) whatever the user's configuration says about unparsed inventory
sources (issue 27.7): Ansible alone would warn and run the play on no hosts with rc 0."""
import os
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBLEM = "pools.ipv6: malformed IPv6 prefix (value: 'fd00:zz::/48')"


def _env(config, **extra):
    env = dict(os.environ, ANSIBLE_CONFIG=config, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default",
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
    for name in ("ANSIBLE_INVENTORY_UNPARSED_FAILED", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED"):
        env.pop(name, None)
    env.update(extra)
    return env


def _bad_topology(tmp_path):
    with open(os.path.join(ROOT, "inventories", "example", "fabric.yml")) as handle:
        data = yaml.safe_load(handle)
    data["pools"]["ipv6"] = "fd00:zz::/48"
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def _user_config(tmp_path):
    """A user's ansible.cfg that says an unparsed source is only a warning."""
    path = tmp_path / "ansible.cfg"
    path.write_text("[defaults]\ncollections_path = %s\n\n[inventory]\nenable_plugins = netscale.multinic.fabric, yaml, ini, auto\n"
                    "unparsed_is_failed = false\nany_unparsed_is_failed = false\n" % os.path.join(ROOT, ".build"))
    return str(path)


def _run(argv, env):
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def _assert_failed_with_problems(p, problem=PROBLEM):
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert problem in out, out
    assert "Completely failed to parse inventory source" in out, out
    assert "PLAY RECAP" not in out, out


def test_plan_playbook_fails_on_an_invalid_topology_with_the_repository_config(tmp_path):
    topo = _bad_topology(tmp_path)
    dest = tmp_path / "intended"
    p = _run(["ansible-playbook", "-i", str(topo), os.path.join(ROOT, "playbooks", "plan.yml"),
              "-e", "fabric_intended_dir=%s" % dest], _env(os.path.join(ROOT, "ansible.cfg")))
    _assert_failed_with_problems(p)
    assert not dest.exists()


@pytest.mark.parametrize("setting", ["config", "environment"])
def test_site_playbook_fails_on_an_invalid_topology_when_the_user_says_unparsed_is_fine(tmp_path, setting):
    topo = _bad_topology(tmp_path)
    if setting == "config":
        env = _env(_user_config(tmp_path))
    else:
        env = _env(os.path.join(ROOT, "ansible.cfg"), ANSIBLE_INVENTORY_UNPARSED_FAILED="false",
                   ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="false")
    p = _run(["ansible-playbook", "-i", str(topo), os.path.join(ROOT, "playbooks", "site.yml"), "--check"], env)
    _assert_failed_with_problems(p)


def test_plan_playbook_fails_on_a_topology_that_is_not_yaml(tmp_path):
    topo = tmp_path / "fabric.yml"
    topo.write_text("plugin: netscale.multinic.fabric\nname: [unclosed\n")
    p = _run(["ansible-playbook", "-i", str(topo), os.path.join(ROOT, "playbooks", "plan.yml"),
              "-e", "fabric_intended_dir=%s" % (tmp_path / "intended")], _env(_user_config(tmp_path)))
    _assert_failed_with_problems(p, problem="fabric.yml")
    assert "while parsing" in p.stdout + p.stderr or "expected" in p.stdout + p.stderr
