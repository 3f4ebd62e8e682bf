"""playbooks/drain.yml and undrain.yml through Ansible itself, on the controller only (ToR scope: the budget, the
journal and the scheduler hook; no lab): the budget's refusals, check mode, idempotency, the lease input."""
import json
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="default", PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ["PATH"])
INVENTORY = os.path.join(ROOT, "inventories", "example", "fabric.yml")


def _play(name, journal, *extra):
    # the fabric lease lives beside the rollout journals (<rollout_journal_dir>/leases): in the test's own folder
    return subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(ROOT, "playbooks", name),
                           "-e", "drain_journal_dir=%s" % journal,
                           "-e", "rollout_journal_dir=%s" % os.path.join(os.path.dirname(str(journal)), "rollouts")]
                          + list(extra), cwd=ROOT, env=ENV, capture_output=True, text=True, check=False)


def _journal(journal):
    path = os.path.join(str(journal), "example", "drain-journal.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(x) for x in f.read().splitlines()]


def test_tor_drain_budget_hook_journal_idempotent_and_undrain(tmp_path):
    journal = tmp_path / "journal"
    hook_out = tmp_path / "hook.txt"
    script = 'echo "$NETSCALE_DRAIN_ACTION $NETSCALE_DRAIN_ELEMENT $NETSCALE_DRAIN_HOSTS" >> %s' % hook_out
    hook = ["-e", json.dumps({"drain_scheduler_hook": ["sh", "-c", script]})]
    budget = ["-e", json.dumps({"drain_budget": {"max_zone_tor_share": 0.5}})]
    # check mode: the verdict, nothing journaled, the hook not run
    check = _play("drain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1", "--check", *(hook + budget))
    assert check.returncode == 0, check.stdout[-3000:]
    assert "drain tor:b1-az1-r1: allowed" in check.stdout
    assert _journal(journal) == [] and not hook_out.exists() and not journal.exists()
    # zone b1-az1 has 2 racks: 1 of 2 is over the default share 0.25 -> refused, journaled, nothing else
    refused = _play("drain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1", *hook)
    assert refused.returncode != 0
    assert "REFUSED by the blast-radius budget: at most 0.25 of a zone's racks (ToRs) out at once" in refused.stdout
    recs = _journal(journal)
    assert [(r["type"], r["allowed"]) for r in recs] == [("decision", False)] and not hook_out.exists()
    # allowed with a budget that permits it: journaled decision + outcome, hook told
    first = _play("drain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1", *(hook + budget))
    assert first.returncode == 0, first.stdout[-3000:]
    assert hook_out.read_text() == "drain tor:b1-az1-r1 gpu-b1-az1-r1-h1,gpu-b1-az1-r1-h2,gpu-b1-az1-r1-h3\n"
    # again: already drained, nothing to change, hook not run again, changed=0
    again = _play("drain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1", *(hook + budget))
    assert again.returncode == 0 and "already drained, nothing to change" in again.stdout
    assert "changed=0" in again.stdout and hook_out.read_text().count("\n") == 1
    # another job holds the fabric lease: the undrain is refused
    lease = ["-e", json.dumps({"drain_lease_holder": {"job": "rollout-7", "kind": "rollout"}})]
    held = _play("undrain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1", *(hook + lease))
    assert held.returncode != 0 and "the fabric lease is held by rollout rollout-7" in held.stdout
    undrain = _play("undrain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_tor=b1-az1-r1-tor", *hook)
    assert undrain.returncode == 0, undrain.stdout[-3000:]
    assert hook_out.read_text().splitlines()[-1].startswith("undrain tor:b1-az1-r1 ")
    recs = _journal(journal)
    assert [(r["type"], r["action"], r.get("allowed", r.get("ok"))) for r in recs] == [
        ("decision", "drain", False), ("decision", "drain", True), ("outcome", "drain", True),
        ("decision", "drain", True), ("decision", "undrain", False),
        ("decision", "undrain", True), ("outcome", "undrain", True)]


def test_bad_request_names_the_field_and_changes_nothing(tmp_path):
    journal = tmp_path / "journal"
    bad = _play("drain.yml", journal, "-e", "drain_scope=nic", "-e", "drain_host=gpu-b1-az1-r1-h1", "-e", "drain_nic=7")
    assert bad.returncode != 0 and "drain_nic=7: gpu-b1-az1-r1-h1 has NICs 0 to 1" in bad.stdout
    nohost = _play("drain.yml", journal, "-e", "drain_scope=nic")
    assert nohost.returncode != 0 and "Fix: set drain_scope=nic with drain_host=HOST" in nohost.stdout
    assert _journal(journal) == []


def test_drain_refused_while_another_job_holds_the_fabric_lease(tmp_path):
    """A rollout (here: this test's process, holding the lease through the core as rollout.yml would) holds the
    fabric: drain.yml is refused, naming the holder, and nothing is changed; the refusal is journaled as a budget
    decision (rule lease, the holder named) - in check mode only shown. Once the rollout released it, the same drain
    is decided by the budget and takes and gives back the lease."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, ".build"))
    from ansible_collections.netscale.multinic.plugins.module_utils.rollout import lease

    journal = tmp_path / "journal"
    leases = str(tmp_path / "rollouts" / "leases")
    holder = lease.make_member("rollout-under-test", "rollout.yml", pid=os.getpid())
    assert lease.acquire(leases, "example", holder)["action"] == "acquired"
    budget = ["-e", json.dumps({"drain_budget": {"max_zone_tor_share": 0.5}})]
    check = _play("drain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1", "--check", *budget)
    assert check.returncode != 0 and "REFUSED by the blast-radius budget: the fabric lease is held by " \
        "rollout-under-test" in check.stdout, check.stdout[-3000:]
    assert _journal(journal) == []   # check mode journals nothing
    refused = _play("drain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1", *budget)
    assert refused.returncode != 0
    assert "rollout-under-test" in refused.stdout and "rollout.yml" in refused.stdout, refused.stdout[-3000:]
    assert "REFUSED by the blast-radius budget: the fabric lease is held by rollout-under-test" in refused.stdout
    recs = _journal(journal)
    assert [(r["type"], r["action"], r["allowed"]) for r in recs] == [("decision", "drain", False)], recs
    assert len(recs[0]["reasons"]) == 1 and "playbook rollout.yml" in recs[0]["reasons"][0], recs[0]["reasons"]
    assert re.findall(r"PLAY \[(.*?)\]", refused.stdout)[-1] == "Drain | blast-radius budget"   # stopped there
    assert lease.inspect(leases, "example")["members"][0]["rollout_id"] == "rollout-under-test"
    assert len(lease.inspect(leases, "example")["members"]) == 1   # the refused drain neither joined nor released it
    lease.release(leases, "example", lease.member_key(holder))
    allowed = _play("drain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1", *budget)
    assert allowed.returncode == 0, allowed.stdout[-3000:]
    outcomes = [(r["type"], r.get("allowed", r.get("ok"))) for r in _journal(journal)]
    assert outcomes == [("decision", False), ("decision", True), ("outcome", True)]
    assert not lease.inspect(leases, "example")["members"]   # the drain gave it back


def test_a_lease_that_fails_for_another_reason_than_a_holder_stops_the_drain_there(tmp_path):
    """drain.yml lets only a refusal (another holder) through to the budget; a lease that cannot be taken at all (here
    a fabric name the lease refuses) fails at the lease task, naming the field, and nothing is journaled."""
    journal = tmp_path / "journal"
    bad = _play("drain.yml", journal, "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1",
                "-e", "fabric_lease_fabric=bad/name")
    assert bad.returncode != 0
    assert "fabric='bad/name': use letters, digits" in bad.stdout, bad.stdout[-3000:]
    assert "Blast-radius budget" not in bad.stdout and _journal(journal) == []


def test_started_by_the_rulebook_without_the_fabrics_journal_is_refused(tmp_path):
    """Under Event-Driven Ansible the playbook runs from a temporary copy of its directory: a drain started by the
    rulebook (netscale_eda_request set) without absolute paths for the drain journal and the lease decides nothing,
    says which variable to set, and journals nothing (a journal under the copy would be empty every time and the
    budget and the lease would see no earlier drain and no rollout)."""
    def run(*extra):
        return subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(ROOT, "playbooks", "drain.yml"),
                               "-e", "drain_scope=tor", "-e", "drain_rack=b1-az1-r1",
                               "-e", "netscale_eda_request=req-1"] + list(extra),
                              cwd=str(tmp_path), env=ENV, capture_output=True, text=True, check=False)
    bare = run()
    assert bare.returncode != 0 and "Fix: set netscale_eda_report_root" in bare.stdout, bare.stdout[-3000:]
    relative = run("-e", "drain_journal_dir=reports/drain", "-e", "rollout_report_root=reports")
    assert relative.returncode != 0 and "drain_journal_dir=reports/drain" in relative.stdout, relative.stdout[-3000:]
    assert os.listdir(str(tmp_path)) == []   # nothing journaled, no lease taken, anywhere under the working dir
    journal = tmp_path / "reports" / "drain"
    given = run("-e", "drain_journal_dir=%s" % journal, "-e", "rollout_report_root=%s" % (tmp_path / "reports"),
                "-e", json.dumps({"drain_budget": {"max_zone_tor_share": 0.5}}))
    assert given.returncode == 0, given.stdout[-3000:]
    assert [(r["type"], r.get("allowed", r.get("ok"))) for r in _journal(journal)] == [("decision", True), ("outcome", True)]


def test_spine_request_without_or_with_an_unknown_spine_is_refused_before_any_device_is_touched(tmp_path):
    journal = tmp_path / "journal"
    nospine = _play("drain.yml", journal, "-e", "drain_scope=spine")
    assert nospine.returncode != 0 and "drain_spine=(unset)" in nospine.stdout
    assert "or drain_scope=spine with drain_spine=SPINE" in nospine.stdout
    unknown = _play("drain.yml", journal, "-e", "drain_scope=spine", "-e", "drain_spine=b1-az1-spine9")
    assert unknown.returncode != 0
    assert "drain_spine='b1-az1-spine9': not a spine of this fabric. Fix: name a spine of the inventory's spines " \
        "group." in unknown.stdout, unknown.stdout[-3000:]
    # the request stopped on the controller: no ToR was read, no spine reached
    assert "b1-az1-r1-tor" not in unknown.stdout and "Drain | spine" not in unknown.stdout
    assert _journal(journal) == []
