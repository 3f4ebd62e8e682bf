# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""netscale.multinic.rollout_decide through Ansible itself: per-host facts read by name (lost hosts, deploy
errors, gate verdicts), the wave's report and journal records, the preflight over the lab inventory and over
an AWX slice of it holding no GPU host (nothing to deploy), and refusals naming the field and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
           PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
# the lab's TCP-MD5 keys are vaulted (scripts/setup.sh writes the password file)
ENV["ANSIBLE_VAULT_PASSWORD_FILE"] = os.path.join(ROOT, ".cache", "lab-vault-password")

WAVE = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        __rollout_lost: "{{ inventory_hostname in ['h3'] }}"
        __rollout_host_error: "{{ 'no route' if inventory_hostname == 'h3' else '' }}"
        __rollout_host_failed: false
        health_gates_verdict: "{{ 'inconclusive' if inventory_hostname == 'h2' else 'pass' }}"
        health_gates_results: [{gate: bgp_sessions, verdict: pass, values: {n: 1}}]
    - name: start
      netscale.multinic.rollout_decide:
        decision: account
        wave: canary
        hosts: [h1, h2, h3, h4]
        batch: "{{ ansible_play_batch }}"
        max_unreachable: "25%"
      run_once: true
      register: start
    - name: deploy
      netscale.multinic.rollout_decide:
        decision: account
        step: deploy
        wave: canary
        hosts: [h1, h2, h3, h4]
        batch: [h1, h2]
        known: "{{ start.lost }}"
      run_once: true
      register: deploy
    - name: verdict
      netscale.multinic.rollout_decide:
        decision: verdict
        batch: [h1, h2]
      run_once: true
      register: verdict
    - name: end
      netscale.multinic.rollout_decide:
        decision: wave_end
        wave: canary
        hosts: [h1, h2, h3, h4]
        batch: [h1, h2]
        deploy: "{{ deploy }}"
        gates: "{{ deploy }}"
        wave_verdict: "{{ verdict.verdict }}"
        failed_hosts: "{{ verdict.failed_hosts }}"
        started: 1.5
      run_once: true
      register: end
"""


def _run(tmp_path, play, inventory, *extra):
    pb = tmp_path / "play.yml"
    pb.write_text(play)
    p = subprocess.run(["ansible-playbook", "-i", str(inventory), str(pb)] + list(extra), cwd=ROOT, env=ENV,
                       capture_output=True, text=True, check=False)
    # the JSON result, then the rollout_progress callback's closing line when a decision recorded report events
    out = json.JSONDecoder().raw_decode(p.stdout[p.stdout.index("{"):])[0] if "{" in p.stdout else {}
    tasks = dict((t["task"]["name"], t["hosts"]) for play in out.get("plays", []) for t in play["tasks"])
    return p, tasks


def test_wave_decisions_read_the_hosts_facts(tmp_path):
    p, tasks = _run(tmp_path, WAVE, "h1,h2,h3,h4", "-c", "local")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    start = tasks["start"]["h1"]
    assert start["lost"] == ["h3"] and start["budget"] == 1 and not start["over_budget"]
    assert start["journal"][0] == {"_record": "host", "hosts": ["h3"], "state": "unreachable", "wave": "canary",
                                   "errors": {"h3": "no route"}}
    deploy = tasks["deploy"]["h1"]
    assert deploy["lost"] == ["h3", "h4"] and deploy["over_budget"] and deploy["dropped"] == ["h4"]
    verdict = tasks["verdict"]["h1"]
    assert verdict["verdict"] == "inconclusive" and verdict["failed_hosts"] == ["h2"]
    end = tasks["end"]["h1"]
    assert end["report"]["status"] == "inconclusive" and end["report"]["errors"][0] == "no route"
    assert [j["_record"] for j in end["journal"]] == ["gate", "gate", "wave"]
    assert all(r["changed"] is False for r in (start, deploy, verdict, end))


def test_preflight_over_the_lab_inventory_and_an_awx_slice_without_gpu_host(tmp_path):
    sys.path.insert(0, ROOT)
    from labkit.awx_jobs import slice_inventory
    play = """
- hosts: localhost
  gather_facts: false
  vars:
    topology: %s
  tasks:
    - name: ToRs and spines the slice lacks (as rollout.yml adds them)
      ansible.builtin.add_host:
        name: "{{ item.name }}"
        groups: "{{ item.groups }}"
        multinic_rack: "{{ item.vars.multinic_rack | default(omit) }}"
        multinic_fabric_name: "{{ item.vars.multinic_fabric_name }}"
      loop: "{{ lookup('netscale.multinic.fabric_hosts', topology, groups=['tors', 'spines'], wantlist=true)
                | rejectattr('name', 'in', groups['all']) | list }}"
    - name: inventory
      netscale.multinic.rollout_decide:
        decision: inventory
        topology: "{{ topology }}"
      register: inv
""" % os.path.join(ROOT, "inventories", "lab", "fabric.yml")
    full = subprocess.run(["ansible-inventory", "-i", "inventories/lab/fabric.yml", "--list", "--export"], cwd=ROOT,
                          env=ENV, capture_output=True, text=True, check=True)
    inv = json.loads(full.stdout)
    for number, gpu in ((1, ["lab-r1-h1", "lab-r2-h1"]), (3, [])):
        # as AWX hands a job its slice: an executable inventory script printing the --list JSON
        script = tmp_path / ("slice%d.py" % number)
        script.write_text("#!%s\nimport json, sys\nDATA = json.loads(%r)\nprint(json.dumps(DATA if '--list' in "
                          "sys.argv else {}))\n" % (sys.executable, json.dumps(slice_inventory(inv, number, 3))))
        script.chmod(0o700)
        p, tasks = _run(tmp_path, play, script)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
        res = tasks["inventory"]["localhost"]
        assert res["gpu_hosts"] == gpu and res["slice_empty"] == (not gpu) and res["problems"] == []
        assert res["rack_tors"] == {"lab-r1": "lab-r1-tor", "lab-r2": "lab-r2-tor"} and res["fabric"] == "lab"


@pytest.mark.parametrize("spec", ["150%", "-1", "x"])
def test_budget_refused_before_anything_changes(tmp_path, spec):
    play = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: budget
      netscale.multinic.rollout_decide: {decision: budget, max_unreachable: "%s"}
""" % spec
    p, tasks = _run(tmp_path, play, "localhost,")
    assert p.returncode != 0
    assert "rollout_max_unreachable='%s'" % spec in tasks["budget"]["localhost"]["msg"]


def test_md5_key_missing_is_refused_naming_the_hosts(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("""
all:
  vars:
    tor_bgp_md5_keys: {h1: k1, h3: k3}
  children:
    gpu_hosts:
      hosts:
        h1: {multinic_host: {rack: r1, tor: t1}}
        h2: {multinic_host: {rack: r1, tor: t1}}
        h3: {multinic_host: {rack: r2, tor: t2}, tor_bgp_md5_keys: {}}
    tors:
      hosts:
        t1: {multinic_rack: {name: r1}, tor_bgp_options: {md5: required}}
        t2: {multinic_rack: {name: r2}, tor_bgp_options: {md5: required}, tor_bgp_md5_keys: {h3: k3}}
    spines:
      hosts:
        s1: {}
""")
    play = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: inventory
      netscale.multinic.rollout_decide: {decision: inventory}
"""
    p, tasks = _run(tmp_path, play, inv)
    res = tasks["inventory"]["localhost"]
    assert p.returncode != 0 and res["md5_missing"] == ["h2", "h3"], res
    assert "no TCP-MD5 key for GPU host(s) h2, h3" in res["msg"] and "nothing was changed" in res["msg"]


CHECKED_WAVE = """
- hosts: all
  gather_facts: false
  module_defaults:
    netscale.multinic.rollout_decide: {wave: canary, batch: "{{ ansible_play_batch }}", max_unreachable: "25%"}
  tasks:
    - name: names
      netscale.multinic.rollout_decide: {decision: names, report_root: /tmp/r}
      run_once: true
    - name: reach
      ansible.builtin.command: "{{ 'false' if inventory_hostname == 'h3' else 'true' }}"
      register: __rollout_reach
      changed_when: false
      ignore_errors: true
    - name: start
      netscale.multinic.rollout_decide: {decision: account, step: start, hosts: "{{ ansible_play_batch }}"}
      run_once: true
      register: start
    - ansible.builtin.meta: end_host
      when: inventory_hostname in start.lost
    - name: reach after
      ansible.builtin.command: "{{ 'false' if inventory_hostname == 'h4' else 'true' }}"
      register: __rollout_reach
      changed_when: false
      ignore_errors: true
    - ansible.builtin.set_fact:
        __rollout_host_error: "{{ 'deploy failed' if inventory_hostname == 'h2' else '' }}"
        __rollout_host_failed: "{{ inventory_hostname == 'h2' }}"
        health_gates_verdict: pass
        multinic_host: {tor: "t-{{ inventory_hostname }}"}
    - name: deploy
      netscale.multinic.rollout_decide: {decision: account, step: deploy, hosts: "{{ start.hosts }}", known: "{{ start.lost }}"}
      run_once: true
      register: deploy
    - ansible.builtin.meta: end_host
      when: inventory_hostname in deploy.lost
    - name: verdict
      netscale.multinic.rollout_decide: {decision: verdict, hosts: "{{ start.hosts }}", known: "{{ deploy.lost }}"}
      run_once: true
      register: verdict
    - name: end
      netscale.multinic.rollout_decide:
        decision: wave_end
        hosts: "{{ start.hosts }}"
        start: "{{ start }}"
        deploy: "{{ deploy }}"
        gates: "{{ verdict }}"
        wave_verdict: fail
        failed_hosts: "{{ verdict.failed_hosts }}"
        share_tolerance: 0.1
        run: {journal: /j/run.json, report_dir: /r/1, rollout_id: rid}
      run_once: true
      register: end
    - name: facts
      ansible.builtin.debug: {msg: "{{ rollout_run_id }} {{ rollout_journal_root }}"}
      run_once: true
"""


def test_wave_decisions_read_the_registered_checks(tmp_path):
    p, tasks = _run(tmp_path, CHECKED_WAVE, "h1,h2,h3,h4", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    start = tasks["start"]["h1"]
    assert start["lost"] == ["h3"] and start["budget"] == 1 and start["marks"] == {
        "h3": "unreachable at wave start: non-zero return code"}
    assert start["events"][0]["data"]["status"] == "running" and start["events"][0]["data"]["unreachable"] == ["h3"]
    deploy = tasks["deploy"]["h1"]
    assert deploy["lost"] == ["h3", "h4"] and deploy["over_budget"] and list(deploy["marks"]) == ["h4"]
    assert deploy["journal"][0]["errors"] == {"h4": "unreachable after the deploy: non-zero return code"}
    verdict = tasks["verdict"]["h1"]
    assert verdict["verdict"] == "fail" and verdict["failed_hosts"] == ["h2"] and verdict["journal"] == []
    assert verdict["failed_journal"] == [{"_record": "host", "hosts": ["h1", "h2"], "state": "failed", "wave": "canary",
                                          "errors": {"h1": "", "h2": "deploy failed"}}]
    assert verdict["failed_tors"] == ["t-h2"]
    end = tasks["end"]["h1"]
    assert end["report"]["errors"] == ["deploy failed", "unreachable at wave start: non-zero return code",
                                       "unreachable after the deploy: non-zero return code"]
    assert [e["event"] for e in end["events"]] == ["wave", "finish"] and end["events"][0]["share_tolerance"] == 0.1
    assert end["events"][0]["data"]["started"] == start["started"]
    assert "unreachable ['h3', 'h4'] beyond rollout_max_unreachable=1" in end["stop"]
    assert tasks["facts"]["h1"]["msg"].endswith(" /tmp/r/journal")


def _frr_reach_play(t1_answer):
    """A play whose first task registers each device's vtysh stand-in: t1 answers ``t1_answer``, t2 fails."""
    return """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.shell: "{{ '%s' if inventory_hostname == 't1' else 'echo bgpd down >&2; exit 1' }}"
      register: __rollout_frr_reach
      changed_when: false
      failed_when: false
""" % t1_answer


def test_frr_answers_read_by_name(tmp_path):
    play = _frr_reach_play("true") + """\
    - name: frr
      netscale.multinic.rollout_decide: {decision: frr, hosts: "{{ ansible_play_hosts_all }}"}
      run_once: true
"""
    p, tasks = _run(tmp_path, play, "t1,t2", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert tasks["frr"]["t1"]["down"] == ["t1: no output", "t2: bgpd down"]


def test_preflight_and_tor_phase_stops(tmp_path):
    """The stops of the preflight and the ToR phase through Ansible: a bad rollout_scope is refused before anything
    is named, devices whose FRR does not answer come with their journal event and stop message, a spine gate that
    did not pass fails the task (the ToR phase's rescue), a ToR failure names the task and the rollout."""
    play = _frr_reach_play("echo {}") + """\
    - name: frr
      netscale.multinic.rollout_decide: {decision: frr, hosts: "{{ ansible_play_hosts_all }}", rollout_id: rid}
      run_once: true
    - name: scope
      netscale.multinic.rollout_decide: {decision: names, scope: some, report_root: /nonexistent}
      run_once: true
      ignore_errors: true
    - name: spines
      netscale.multinic.rollout_decide:
        decision: tor_configured
        tor: "{{ inventory_hostname }}"
        rack: r1
        backup_dir: /b
        results: [{verdict: pass, values: {}}, {verdict: fail, values: {routes: [x]}}]
      ignore_errors: true
    - ansible.builtin.set_fact:
        health_gates_verdict: "{{ 'fail' if inventory_hostname == 't2' else 'pass' }}"
        multinic_host: {tor: "{{ inventory_hostname }}-tor"}
    - name: verdict
      netscale.multinic.rollout_decide:
        decision: verdict
        wave: w2
        hosts: [t1, t2]
        batch: "{{ ansible_play_batch }}"
        all_waves: [{name: w1, racks: [r1]}, {name: w2, racks: [r1, r2]}, {name: w3, racks: [r3]}]
        rack_tors: {r1: t1-tor, r2: t2-tor, r3: t3-tor}
        tors: [t1-tor, t2-tor, t3-tor]
      run_once: true
      register: verdict
    - name: end
      netscale.multinic.rollout_decide:
        decision: wave_end
        wave: w2
        hosts: [t1, t2]
        batch: [t1, t2]
        deploy: {messages: []}
        gates: "{{ verdict }}"
        wave_verdict: fail
        failed_hosts: [t2]
      run_once: true
    - name: tor
      netscale.multinic.rollout_decide:
        decision: tor_failed
        tor: "{{ inventory_hostname }}"
        backup_dir: /b
        failed_task: Apply
        failed_msg: frr-reload.py --reload failed
        rollout_id: rid
"""
    p, tasks = _run(tmp_path, play, "t1,t2", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    frr = tasks["frr"]["t1"]
    assert frr["down"] == ["t2: bgpd down"] and frr["journal"][0]["devices"] == ["t2: bgpd down"]
    assert frr["events"][0]["data"]["failed_wave"] == "preflight"
    assert frr["stop"].startswith("FRR not answering on t2: bgpd down. Nothing was changed by this job.")
    assert tasks["scope"]["t1"]["failed"] and "rollout_scope='some'" in tasks["scope"]["t1"]["msg"]
    assert "run_id" not in tasks["scope"]["t1"]
    spines = tasks["spines"]["t2"]
    assert spines["failed"] and spines["msg"] == "spine_task_routes failed after t2: [{'routes': ['x']}]"
    assert spines["events"][0]["data"]["gates"][1]["target"] == "spines"
    # a wave that does not pass names the ToRs to restore: not r1's (a host of the passed wave w1 lives there)
    verdict = tasks["verdict"]["t1"]
    assert verdict["verdict"] == "fail" and verdict["restore"] == ["t2-tor", "t3-tor"]
    assert tasks["end"]["t1"]["report"]["rollback"]["tors_restored"] == ["t2-tor", "t3-tor"], tasks["end"]["t1"]
    tor = tasks["tor"]["t1"]
    assert tor["error"] == "t1: 'Apply' failed: frr-reload.py --reload failed" and not tor.get("failed")
    assert tor["journal"][0]["state"] == "restored" and "-e rollout_id=rid" in tor["stop"]


RECORDING = """
- hosts: all
  gather_facts: false
  module_defaults:
    netscale.multinic.rollout_decide:
      record_to: {dir: "%(tmp)s/journal", rollout_id: rid, job: j1, report_dir: "%(tmp)s/report"}
  tasks:
    - ansible.builtin.shell: "{{ 'echo {}' if inventory_hostname == 't1' else 'echo bgpd down >&2; exit 1' }}"
      register: __rollout_frr_reach
      changed_when: false
      failed_when: false
    - name: frr
      netscale.multinic.rollout_decide: {decision: frr, hosts: "{{ ansible_play_hosts_all }}"}
      run_once: true
      ignore_errors: true
    - name: tor
      netscale.multinic.rollout_decide: {decision: tor_failed, tor: t1, backup_dir: /b, failed_task: Apply}
      run_once: true
      ignore_errors: true
    - name: configured
      netscale.multinic.rollout_decide: {decision: tor_configured, tor: t1, rack: r1, backup_dir: /b}
      run_once: true
      ignore_errors: true
    - name: incomplete
      netscale.multinic.rollout_decide: {decision: frr, hosts: [t1], record_to: {dir: /nonexistent}}
      run_once: true
      ignore_errors: true
    - name: approve
      netscale.multinic.rollout_decide:
        decision: approve
        wave_verdict: inconclusive
        failed_journal: [{_record: host, hosts: [t1], state: failed, wave: w1}]
        record_to: {dir: "%(tmp)s/a-file", rollout_id: rid, job: j1}
      run_once: true
    - name: finish
      netscale.multinic.rollout_decide: {decision: finish, hosts: [], run_id: run1}
      run_once: true
    - name: unwritable stop
      netscale.multinic.rollout_decide:
        decision: tor_failed
        tor: t2
        backup_dir: /b
        failed_task: Apply
        record_to: {dir: "%(tmp)s/a-file", rollout_id: rid, job: j1}
      run_once: true
      ignore_errors: true
"""


def test_decisions_record_themselves(tmp_path):
    """With record_to a decision writes its journal records, then its report events, and a stop fails the task with
    its message; a record the journal refuses fails naming it and writes nothing; check mode writes no journal."""
    play = RECORDING % {"tmp": tmp_path}
    (tmp_path / "a-file").write_text("not a directory\n")   # approve's journal cannot be written there
    args = ("-c", "local", "-e", "ansible_python_interpreter=" + sys.executable)
    p, tasks = _run(tmp_path, play, "t1,t2", *args)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    frr = tasks["frr"]["t1"]
    assert frr["failed"] and frr["msg"].startswith("FRR not answering on t2: bgpd down. Nothing was changed")
    assert "-e rollout_id=rid" in frr["msg"], "the stop names the rollout recorded to"
    journal_file = frr["recorded"]["path"]
    assert journal_file == str(tmp_path / "journal" / "rid" / "j1.json")
    assert [e["event"] for e in frr["recorded"]["report"]["events"]] == ["finish"]
    tor = tasks["tor"]["t1"]
    assert tor["failed"] and tor["msg"].startswith("t1: 'Apply' failed: . The ToR was restored")
    configured = tasks["configured"]["t1"]
    assert configured["failed"] and "tor t1: restored -> configured is not a rollout transition" in configured["msg"]
    assert "recorded" not in configured
    incomplete = tasks["incomplete"]["t1"]
    assert incomplete["failed"] and "record_to: rollout_id, job missing" in incomplete["msg"]
    # a wave settling on fail: its record failing is a warning, never a failure (the rollback must still run)
    approve = tasks["approve"]["t1"]
    assert approve["verdict"] == "fail" and not approve.get("failed") and "a-file" in approve["recorded"]["error"]
    # a stop whose record cannot be written fails naming the journal, and still says why the run stops
    unwritable = tasks["unwritable stop"]["t1"]
    assert unwritable["failed"] and unwritable["msg"].startswith("record_to: writing the journal %s" % (tmp_path / "a-file"))
    assert "; and the run stops: t2: 'Apply' failed" in unwritable["msg"]
    finish = tasks["finish"]["t1"]
    assert finish["status"] == "passed" and finish["where"] == "rollout rid (run run1) passed: %s; journal %s" % (
        tmp_path / "report" / "report.md", journal_file)
    with open(journal_file) as handle:
        written = json.load(handle)["events"]
    assert [(e["type"], e.get("kind") or e.get("state")) for e in written] == [
        ("event", "preflight_failed"), ("tor", "restored"), ("event", "finished")]
    with open(tmp_path / "report" / "report.json") as handle:
        report = json.load(handle)
    assert report["run"]["status"] == "passed" and report["run"]["message"].startswith("nothing to deploy")
    # check mode: the same decisions, the journal file untouched
    p, tasks = _run(tmp_path, play, "t1,t2", "--check", *args)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert tasks["frr"]["t1"]["recorded"]["path"] == journal_file
    with open(journal_file) as handle:
        assert json.load(handle)["events"] == written
