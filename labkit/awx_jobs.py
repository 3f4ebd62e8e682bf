# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the AWX objects of ``awx/configure.yml`` the way AWX runs them, without an AWX server.

AWX runs every job with ansible-runner in a private data directory: the project checkout, the job
template's playbook, its extra_vars (plus the ``awx_*`` job variables AWX injects), the credentials'
vault password, and a static inventory that the inventory source's last sync produced
(``ansible-inventory -i <source> --list --export``). A sliced job template becomes N jobs launched in
parallel; slice k (1-based) gets the inventory's enabled hosts ordered by name, ``hosts[k-1::N]``, with
the groups and group variables of the whole inventory (AWX ``Inventory.get_script_data``). This module
does the same, reading the job templates and the workflow from ``awx/configure.yml`` and its vars file
(read, never copied), so a change there changes what runs here.

Used by the rollout's Molecule scenario (default) and by the security tests, which search the
ansible-runner artifacts (job events) of these runs for keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import yaml
from jinja2.nativetypes import NativeEnvironment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class AwxObjects(object):
    """Job templates and workflows declared in ``awx/configure.yml`` (awx.awx modules), templated with
    its vars file and ``overrides`` (what a site passes with ``-e @site-vars.yml``)."""

    def __init__(self, configure=None, overrides=None):
        self.configure = configure or os.path.join(REPO, "awx", "configure.yml")
        with open(self.configure) as f:
            plays = yaml.safe_load(f)
        play = plays[0]
        # Ansible's precedence: play vars < vars_files < extra vars (the site's overrides)
        variables = dict(play.get("vars") or {})
        for vf in play.get("vars_files", []):
            with open(os.path.join(os.path.dirname(self.configure), vf)) as f:
                variables.update(yaml.safe_load(f) or {})
        variables.update(overrides or {})
        self._env = NativeEnvironment()
        # the playbook's templates may use Ansible's core filters (combine, to_json, ...)
        from ansible.plugins.filter.core import FilterModule
        self._env.filters.update(FilterModule().filters())
        self._vars = variables
        for _round in range(5):   # play vars may be templates referencing other vars
            self._vars = dict((k, self._render(v)) for k, v in self._vars.items())
        self.job_templates = {}
        self.workflows = {}
        for task in play["tasks"]:
            if "awx.awx.job_template" in task:
                jt = self._render(task["awx.awx.job_template"])
                self.job_templates[jt["name"]] = jt
            elif "awx.awx.workflow_job_template" in task:
                wf = self._render(task["awx.awx.workflow_job_template"])
                self.workflows[wf["name"]] = wf

    def _render(self, value):
        if isinstance(value, dict):
            return dict((k, self._render(v)) for k, v in value.items())
        if isinstance(value, list):
            return [self._render(v) for v in value]
        if isinstance(value, str) and "{{" in value:
            return self._env.from_string(value).render(**self._vars)
        return value

    def workflow_order(self, name):
        """The workflow's nodes from its root along the success edges: [(identifier, name, type)]."""
        wf = self.workflows[name]
        nodes = dict((n["identifier"], n) for n in wf["workflow_nodes"])
        targets = set(t["identifier"] for n in nodes.values()
                      for t in (n.get("related") or {}).get("success_nodes", []))
        roots = [i for i in nodes if i not in targets]
        if len(roots) != 1:
            raise ValueError("workflow %s: expected one root node, found %s" % (name, roots))
        order, cur = [], roots[0]
        while cur:
            n = nodes[cur]
            ujt = n["unified_job_template"]
            order.append((cur, ujt["name"], ujt["type"]))
            nxt = (n.get("related") or {}).get("success_nodes", [])
            if len(nxt) > 1:
                raise ValueError("workflow %s: node %s branches; this runner follows one success path" % (name, cur))
            cur = nxt[0]["identifier"] if nxt else None
        return order


def export_inventory(source, env):
    """What an AWX inventory update stores: ``ansible-inventory -i <source> --list --export``."""
    p = subprocess.run(["ansible-inventory", "-i", source, "--list", "--export"], cwd=REPO, env=env,
                       capture_output=True, text=True, check=False, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("inventory sync of %s failed: %s" % (source, p.stderr[-2000:]))
    return _plain(json.loads(p.stdout))


def _plain(value):
    """ansible-inventory marks strings ``{"__ansible_unsafe": ...}``; AWX stores plain values."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return dict((k, _plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def inventory_hosts(inv):
    """Every host of an exported inventory, ordered by name (AWX orders by name before slicing)."""
    hosts = set(inv.get("_meta", {}).get("hostvars", {}))
    for name, group in inv.items():
        if name != "_meta" and isinstance(group, dict):
            hosts.update(group.get("hosts", []))
    return sorted(hosts)


def slice_inventory(inv, number, count):
    """Slice ``number`` (1-based) of ``count`` as AWX's ``get_script_data`` builds it: hosts[number-1::count]
    of the name-ordered hosts; groups keep their variables and children, their hosts are filtered."""
    if count < 1 or not 1 <= number <= count:
        raise ValueError("slice %s of %s" % (number, count))
    keep = set(inventory_hosts(inv)[number - 1::count]) if count > 1 else set(inventory_hosts(inv))
    out = {"_meta": {"hostvars": dict((h, v) for h, v in inv.get("_meta", {}).get("hostvars", {}).items()
                                      if h in keep)}}
    for name, group in inv.items():
        if name == "_meta" or not isinstance(group, dict):
            continue
        g = dict(group)
        if "hosts" in g:
            g["hosts"] = [h for h in g["hosts"] if h in keep]
        out[name] = g
    return out


class JobResult(object):
    def __init__(self, name, slice_number, slice_count, status, rc, data_dir, stdout, job_id=None,
                 report_root=None):
        self.name = name
        self.job_id = job_id
        self.report_root = report_root
        self.slice_number = slice_number
        self.slice_count = slice_count
        self.status = status
        self.rc = rc
        self.data_dir = data_dir
        self.stdout = stdout

    @property
    def ok(self):
        return self.status == "successful" and self.rc == 0

    def __repr__(self):
        return "<job %r slice %d/%d %s rc=%s %s>" % (self.name, self.slice_number, self.slice_count,
                                                     self.status, self.rc, self.data_dir)


class AwxRunner(object):
    """Launches job templates like AWX: one ansible-runner run per job (per slice when sliced)."""

    def __init__(self, objects, inventory_source, work, env=None, verbosity=0, vault_password_file=None,
                 extra_vars=None):
        self.objects = objects
        self.inventory_source = inventory_source
        self.work = work
        self.env = dict(env or os.environ)
        self.verbosity = verbosity
        self.vault_password_file = vault_password_file
        self.extra_vars = dict(extra_vars or {})
        # job ids go on from the jobs already in ``work`` (one id space per work dir, as on one AWX)
        taken = [int(d[4:]) for d in (os.listdir(work) if os.path.isdir(work) else [])
                 if d.startswith("job_") and d[4:].isdigit()]
        self._next_id = max(taken + [100])
        self._lock = threading.Lock()
        self.jobs = []

    def _job_id(self):
        with self._lock:
            self._next_id += 1
            return self._next_id

    def launch(self, name, workflow_job_id=None, extra_vars=None):
        """Run job template ``name``; a sliced template runs its slices in parallel. Returns [JobResult]."""
        jt = self.objects.job_templates[name]
        count = int(jt.get("job_slice_count") or 1)
        if count > 1 and not workflow_job_id:
            # AWX runs a sliced job template as a workflow job of its slices, even when launched alone: every
            # slice gets that workflow job's id as awx_workflow_job_id (awx_meta_vars, get_workflow_job)
            workflow_job_id = self._job_id()
        inv = export_inventory(self.inventory_source, self.env)   # update_on_launch: a sync per launch
        results = [None] * count
        threads = []
        for number in range(1, count + 1):
            job_id = self._job_id()
            data_dir = os.path.join(self.work, "job_%d" % job_id)
            os.makedirs(os.path.join(data_dir, "inventory"), exist_ok=True)
            os.chmod(data_dir, 0o700)
            # AWX hands the job its inventory as an executable script printing the --list JSON
            script = os.path.join(data_dir, "inventory", "hosts")
            with open(script, "w") as f:
                f.write("#!%s\nimport json, sys\nDATA = json.loads(%r)\n"
                        "print(json.dumps(DATA if '--list' in sys.argv else {}))\n"
                        % (sys.executable, json.dumps(slice_inventory(inv, number, count))))
            os.chmod(script, 0o700)
            ev = dict(jt.get("extra_vars") or {})
            ev.update(self.extra_vars)
            ev.update(extra_vars or {})
            # what AWX injects into every job (awx/main/models/jobs.py awx_meta_vars)
            ev.update({"awx_job_id": job_id, "tower_job_id": job_id, "awx_job_template_name": name,
                       "awx_job_launch_type": "workflow" if workflow_job_id else "manual"})
            if workflow_job_id:
                ev.update({"awx_workflow_job_id": workflow_job_id, "tower_workflow_job_id": workflow_job_id})
            cmdline = []
            if jt.get("job_type") == "check":
                cmdline.append("--check")
            if jt.get("diff_mode"):
                cmdline.append("--diff")
            if self.vault_password_file:
                cmdline += ["--vault-password-file", self.vault_password_file]
            kwargs = dict(private_data_dir=data_dir, project_dir=REPO,
                          playbook=os.path.join(REPO, jt["playbook"]),
                          inventory=script,
                          extravars=ev, verbosity=self.verbosity or None, envvars=self.env,
                          cmdline=" ".join(cmdline) or None, quiet=True, ident="job_%d" % job_id)

            t = threading.Thread(target=self._run_job, args=(results, number - 1, count, name, job_id,
                                                             data_dir, kwargs))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        self.jobs.extend(results)
        return results

    @staticmethod
    def _run_job(results, index, count, name, job_id, data_dir, kwargs):
        import ansible_runner

        r = ansible_runner.run(**kwargs)
        stdout_path = os.path.join(data_dir, "artifacts", "job_%d" % job_id, "stdout")
        out = ""
        if os.path.exists(stdout_path):
            with open(stdout_path) as f:
                out = f.read()
        results[index] = JobResult(name, index + 1, count, r.status, r.rc, data_dir, out, job_id=job_id,
                                   report_root=kwargs["extravars"].get("rollout_report_root"))

    def run_workflow(self, name, approve, launch_extra=None):
        """Run a workflow along its success edges. ``approve(previous_results)`` decides an approval
        node (True = approved). Returns [(node, [JobResult] or 'approved'/'denied')]; stops at the first
        failed node or denied approval, as AWX does when only success edges exist."""
        workflow_job_id = self._job_id()
        done, previous = [], None
        for ident, jt_name, kind in self.objects.workflow_order(name):
            if kind == "workflow_approval":
                verdict = "approved" if approve(previous) else "denied"
                done.append((ident, verdict))
                if verdict != "approved":
                    break
                continue
            res = self.launch(jt_name, workflow_job_id=workflow_job_id, extra_vars=launch_extra)
            done.append((ident, res))
            previous = res
            if not all(r.ok for r in res):
                break
        return workflow_job_id, done


def report_dir_of(job):
    """The job's rollout report directory: under AWX the rollout names it <time>-job<awx_job_id>."""
    import glob

    if not job.report_root:
        return None
    found = sorted(glob.glob(os.path.join(job.report_root, "*-job%d" % job.job_id)))
    return found[-1] if found else None


def report_of(job):
    """The job's rollout report (report.json), parsed; None when the job printed none."""
    d = report_dir_of(job)
    if d is None or not os.path.exists(os.path.join(d, "report.json")):
        return None
    with open(os.path.join(d, "report.json")) as f:
        return json.load(f)


def approve_when_reports_passed(previous):
    """The approval node's reviewer: approves when every job of the previous node succeeded and its
    rollout report says passed (what the operator reads before approving in AWX)."""
    if not previous:
        return False
    for job in previous:
        rep = report_of(job)
        if not job.ok or rep is None or rep.get("run", {}).get("status") != "passed":
            return False
    return True


def changed_count(job):
    """Sum of 'changed' over the job's hosts, from the runner's job events (playbook_on_stats)."""
    events_dir = os.path.join(job.data_dir, "artifacts")
    total = 0
    for root, _dirs, files in os.walk(events_dir):
        for name in files:
            if name.endswith(".json") and root.endswith("job_events"):
                with open(os.path.join(root, name)) as f:
                    ev = json.load(f)
                if ev.get("event") == "playbook_on_stats":
                    total += sum((ev.get("event_data", {}).get("changed") or {}).values())
    return total


def _summary(job):
    return {"template": job.name, "slice": "%d/%d" % (job.slice_number, job.slice_count), "status": job.status,
            "job_id": job.job_id, "rc": job.rc, "changed": changed_count(job), "data_dir": job.data_dir,
            "report": (report_of(job) or {}).get("run"), "report_dir": report_dir_of(job)}


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(prog="python -m labkit.awx_jobs", description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--inventory-source", required=True, help="the AWX inventory source (topology file)")
    ap.add_argument("--work", required=True, help="directory for the jobs' private data dirs")
    ap.add_argument("--site-vars", default="{}", help="JSON overrides of awx/vars.yml (like -e @site-vars.yml)")
    ap.add_argument("--extra-vars", default="{}", help="JSON launch-time extra vars (ask_variables_on_launch)")
    ap.add_argument("--verbosity", type=int, default=0)
    ap.add_argument("--vault-password-file")
    ap.add_argument("what", choices=["workflow", "launch"])
    ap.add_argument("name")
    a = ap.parse_args(argv)
    os.makedirs(a.work, mode=0o700, exist_ok=True)
    runner = AwxRunner(AwxObjects(overrides=json.loads(a.site_vars)), a.inventory_source, a.work,
                       verbosity=a.verbosity, vault_password_file=a.vault_password_file,
                       extra_vars=json.loads(a.extra_vars))
    if a.what == "workflow":
        wf_id, done = runner.run_workflow(a.name, approve_when_reports_passed)
        nodes = [{"node": n, "approval": r} if isinstance(r, str) else {"node": n, "jobs": [_summary(j) for j in r]}
                 for n, r in done]
        expected = len(runner.objects.workflow_order(a.name))
        ok = len(done) == expected and all(
            n.get("approval", "approved") == "approved" and all(j["status"] == "successful" for j in n.get("jobs", []))
            for n in nodes)
        out = {"workflow_job_id": wf_id, "nodes": nodes, "ok": ok}
    else:
        jobs = [_summary(j) for j in runner.launch(a.name)]
        out = {"jobs": jobs, "ok": all(j["status"] == "successful" for j in jobs)}
    out["changed"] = sum(j["changed"] for n in out.get("nodes", [{"jobs": out.get("jobs", [])}])
                         for j in n.get("jobs", []))
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
