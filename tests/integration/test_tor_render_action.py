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


SCOPE_INVENTORY = """all:
  children:
    gpu_hosts:
      hosts:
        lab-r1-h1: {host_datapath_ebpf: false}
        lab-r1-h2: {}
        lab-r2-h1: {host_datapath_ebpf: "no"}
        lab-r2-h2: {host_datapath_ebpf: true}
    local:
      hosts:
        localhost:
          ansible_connection: local
          tor_bgp_options: {bfd: {enabled: true}, spine_networks: {ipv4: [198.19.5.0/24]}}
          tor_bgp_spine_networks: {ipv4: [198.19.9.0/24], ipv6: ["fd00:5::/64"]}
"""
SCOPE_PLAY = """- name: Render as the tor_bgp role does, then check as the rollout's change scope does
  hosts: localhost
  gather_facts: false
  vars:
    tor_bgp_bfd_multihop_hosts: null   # the role's default
  tasks:
    - name: Role
      netscale.multinic.tor_render:
        topology: %(topology)s
        dest: "{{ dest }}"
        options: "{{ tor_bgp_options }}"
        spine_networks: "{{ tor_bgp_spine_networks }}"
        bfd_multihop_hosts: "{{ tor_bgp_bfd_multihop_hosts }}"
    - name: Scope check
      netscale.multinic.tor_render:
        topology: %(topology)s
        dest: "{{ dest }}"
        options: "{{ __tv.tor_bgp_options | default({}) }}"
        spine_networks: "{{ __tv.tor_bgp_spine_networks | default({}) }}"
        bfd_multihop_hosts: "{{ __tv.tor_bgp_bfd_multihop_hosts | default(none) }}"
      vars:
        __tv: "{{ hostvars['localhost'] }}"
      check_mode: true
    - name: The composition the scope check used before (no multihop hosts, a flat merge)
      netscale.multinic.tor_render:
        topology: %(topology)s
        dest: "{{ dest }}"
        options: "{{ {'spine_networks': tor_bgp_spine_networks} | combine(tor_bgp_options) }}"
        bfd_multihop_hosts: []
      check_mode: true
"""


def test_role_and_change_scope_render_the_same_text(tmp_path):
    """With BFD on and hosts on the kernel datapath, the rollout's change-scope check renders what the tor_bgp
    role wrote (nothing to write), and the multihop hosts are the gpu_hosts with host_datapath_ebpf false."""
    inv = tmp_path / "hosts.yml"
    inv.write_text(SCOPE_INVENTORY)
    play = tmp_path / "scope.yml"
    play.write_text(SCOPE_PLAY % {"topology": os.path.join(ROOT, "inventories", "lab", "fabric.yml")})
    dest = tmp_path / "intended"
    proc = subprocess.run(["ansible-playbook", "-i", str(inv), str(play), "-e", "dest=%s" % dest], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    tasks = json.loads(proc.stdout[proc.stdout.index("{"):])["plays"][0]["tasks"]
    role, scope, before = (t["hosts"]["localhost"] for t in tasks)
    assert role["changed"] is True and scope["written"] == [], scope["written"]
    files = _files(dest)
    r1 = files[role["devices"]["lab-r1-tor"]["config"]]
    r2 = files[role["devices"]["lab-r2-tor"]["config"]]
    # lab-r1-h1 and lab-r2-h1 on the kernel datapath: ebgp-multihop on their peer-groups, ttl-security elsewhere
    assert "ebgp-multihop" in r1 and "ebgp-multihop" in r2
    for text, kernel, ebpf in ((r1, "lab-r1-h1", "lab-r1-h2"), (r2, "lab-r2-h1", "lab-r2-h2")):
        multihop = set(line.split()[1] for line in text.splitlines() if " ebgp-multihop " in line)
        ttl = set(line.split()[1] for line in text.splitlines() if " ttl-security " in line)
        assert multihop and all(g.startswith("HOST-%s-" % kernel) for g in multihop), multihop
        assert ttl and all(g.startswith("HOST-%s-" % ebpf) for g in ttl), ttl
    # the user's spine_networks.ipv4 wins, the fabric's ipv6 stays (recursive, as the role always merged)
    spine = files[role["devices"]["lab-spine1"]["config"]]
    assert "198.19.5.0/24" in spine and "fd00:5::/64" in spine and "198.19.9.0/24" not in spine
    # the former scope composition saw every ToR as changed
    assert {"lab-r1-tor.cfg", "lab-r2-tor.cfg"} <= set(os.path.basename(p) for p in before["written"]), \
        before["written"]


def test_a_host_datapath_ebpf_that_cannot_be_templated_names_the_host_and_writes_nothing(tmp_path):
    inv = tmp_path / "hosts.yml"
    inv.write_text(SCOPE_INVENTORY.replace('lab-r1-h2: {}', 'lab-r1-h2: {host_datapath_ebpf: "{{ no_such_var }}"}'))
    play = tmp_path / "scope.yml"
    play.write_text(SCOPE_PLAY % {"topology": os.path.join(ROOT, "inventories", "lab", "fabric.yml")})
    dest = tmp_path / "intended"
    proc = subprocess.run(["ansible-playbook", "-i", str(inv), str(play), "-e", "dest=%s" % dest], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    failed = json.loads(proc.stdout[proc.stdout.index("{"):])["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert failed["failed"] is True and "host_datapath_ebpf of lab-r1-h2" in failed["msg"], failed["msg"]
    assert "no_such_var" in failed["msg"] and "Fix:" in failed["msg"]
    assert not dest.exists()
