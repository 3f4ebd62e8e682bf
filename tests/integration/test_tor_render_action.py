"""netscale.multinic.tor_render through Ansible itself: writes, a second run reports no change, check mode
(with --diff) writes nothing and lists what it would write, bad input fails naming the problem and writes
nothing, the result carries every device's summary."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
           PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
PLAY = """- name: Render
  hosts: localhost
  gather_facts: false
  vars:
    tor_bgp_md5_keys: {lab-r1-h1: one-key, lab-r1-h2: two-key}
  tasks:
    - name: Render
      netscale.multinic.tor_render:
        topology: %s
        dest: "{{ dest }}"
        options: "{{ opts | default({}) }}"
"""


def _render(tmp_path, dest, *extra):
    play = tmp_path / "render.yml"
    play.write_text(PLAY % os.path.join(ROOT, "inventories", "lab", "fabric.yml"))
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(play), "-e", "dest=%s" % dest]
                          + list(extra), cwd=ROOT, env=ENV, capture_output=True, text=True, check=False)
    out = json.loads(proc.stdout[proc.stdout.index("{"):])
    return proc.returncode, out["plays"][0]["tasks"][0]["hosts"]["localhost"]


def _files(folder):
    out = {}
    for base, _dirs, files in os.walk(folder):
        for name in files:
            with open(os.path.join(base, name)) as handle:
                out[os.path.join(base, name)] = handle.read()
    return out


def test_render_then_no_change_then_check_mode(tmp_path):
    dest = tmp_path / "intended"
    rc, check = _render(tmp_path, dest, "--check", "--diff")
    assert rc == 0 and check["changed"] is True, check
    assert not dest.exists()
    rc, first = _render(tmp_path, dest)
    assert rc == 0 and first["changed"] is True
    assert sorted(first["written"]) == sorted(_files(dest)) == sorted(check["written"])
    assert len(first["written"]) == 6
    r1 = first["devices"]["lab-r1-tor"]
    assert r1["kind"] == "tor" and r1["md5_names"] == ["lab-r1-h1", "lab-r1-h2"] and r1["counts"]["neighbors"] > 0
    assert "password <md5:lab-r1-h1>" in _files(dest)[r1["config"]]
    assert "one-key" not in json.dumps(first) and all("one-key" not in t for t in _files(dest).values())
    rc, second = _render(tmp_path, dest)
    assert rc == 0 and second["changed"] is False and second["written"] == []
    assert second["devices"] == first["devices"]
    before = _files(dest)
    rc, check = _render(tmp_path, dest, "--check", "--diff", "-e", '{"opts": {"timers": {"keepalive": 5, "hold": 15}}}')
    assert rc == 0 and check["changed"] is True
    assert len(check["written"]) == 6
    assert _files(dest) == before


def test_bad_input_fails_naming_the_field_and_writes_nothing(tmp_path):
    dest = tmp_path / "intended"
    rc, first = _render(tmp_path, dest)
    before = _files(dest)
    rc, bad = _render(tmp_path, dest, "-e", '{"opts": {"md5": "required"}}')
    assert rc != 0 and bad["failed"] is True
    assert [p["path"] for p in bad["problems"]] == ["md5_keys.lab-r2-h1", "md5_keys.lab-r2-h2"]
    assert _files(dest) == before
    assert first["changed"] is True
