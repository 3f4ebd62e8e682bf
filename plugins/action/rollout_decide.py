# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: the rollout's decisions on the controller (docs in plugins/modules/rollout_decide.py; logic in
module_utils/rollout/decide.py). It gathers the inputs from the task's variables and calls the core."""

from __future__ import annotations

import os
import time

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import lookup_loader

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.report import model
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import decide, journal, records, scope
from ansible_collections.netscale.multinic.plugins.modules.rollout_decide import ARGUMENT_SPEC

_MISSING = object()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result["changed"] = False
        try:
            out = getattr(self, "_" + args["decision"])(args, task_vars)
            never_blocks = out.pop("_never_blocks", False)
            if args["record_to"] and not out.get("failed"):
                try:
                    out.update(self._record(args["record_to"], out))
                except MultinicError as exc:
                    if not never_blocks:
                        raise
                    # a rollback follows: its record failing is said, and the rollback still runs
                    out.update(recorded={"error": to_native(exc)}, warnings=[to_native(exc)])
            result.update(out)
        except MultinicError as exc:
            result.update(failed=True, msg=to_native(exc))
        return result

    def _record(self, where, out):
        """The decision's journal records, then its report events, written on the controller (the journal not in
        check mode); a decision that stops the run (``stop``) then fails with its message."""
        missing = [k for k in ("dir", "rollout_id", "job") if not where.get(k)]
        if missing:
            raise MultinicError("record_to: %s missing (got %s); give the run's journal dir, rollout_id and job (the "
                                "fact rollout_record_to of the names decision)" % (", ".join(missing), sorted(where)))
        items, events = out.get("journal") or [], out.get("events") or []
        recorded = {}
        if items or events:
            try:
                written = records.record(where, items, events, check_mode=bool(self._task.check_mode))
            except (MultinicError, OSError, ValueError) as exc:
                # a stop is still said: what the run stopped for matters more than its record
                raise MultinicError("record_to: writing the journal %s or the report %s failed: %s%s"
                                    % (where.get("dir"), where.get("report_dir"), to_native(exc),
                                       "; and the run stops: %s" % out["stop"] if out.get("stop") else ""))
            recorded = dict((k, written[k]) for k in ("path", "report") if k in written)
        extra = {"recorded": recorded}
        if out.get("stop"):
            extra.update(failed=True, msg=out["stop"])
        return extra

    # per-host facts, read by name (no Jinja loop in the playbook)
    def _fact(self, task_vars, host, name, default=None):
        hostvars = task_vars.get("hostvars") or {}
        if host not in hostvars:
            return default
        hv = hostvars[host]
        return hv[name] if name in hv else default

    def _inventory(self, args, task_vars):
        groups = task_vars.get("groups") or {}
        hostvars = task_vars.get("hostvars") or {}
        names = list(groups.get("gpu_hosts") or [])
        tors = list(groups.get("tors") or [])
        raws = {}
        own = self._host_var_reader(hostvars, raws)
        # Only a host's rack and ToR are read (each templated alone): templating a whole multinic_host walks
        # every NIC and task slot of it, which was most of a region's preflight (docs/performance.md).
        gpu = dict((h, self._placement(own(h, "multinic_host"))) for h in names)
        rack_tors = {}
        for t in tors:
            rack = own(t, "multinic_rack")
            name = self._templar.template(rack.get("name")) if isinstance(rack, dict) else None
            if name is not None:
                rack_tors[name] = t
        first = (names or tors or [None])[0]
        fabric = self._fact(task_vars, first, "multinic_fabric_name", "") if first else ""
        topology_gpu = None
        if not names and args.get("topology"):
            lookup = lookup_loader.get("netscale.multinic.fabric_hosts", loader=self._loader, templar=self._templar)
            topology_gpu = [h["name"] for h in lookup.run([args["topology"]], variables=task_vars, groups=["gpu_hosts"])]
        # TCP-MD5: a key per host where its ToR requires MD5. The key maps usually come from one group
        # variable: each distinct (raw) map is templated once, so the check stays linear in the hosts.
        cache = {}

        def keys_of(host):
            if host not in raws:
                raws[host] = self._raw(hostvars, host)
            value = raws[host].get("tor_bgp_md5_keys", _MISSING)
            if value is _MISSING:
                return {}
            if id(value) not in cache:
                cache[id(value)] = (value, self._templar.template(value) or {})
            return cache[id(value)][1]

        # Whether TCP-MD5 is required is read as the tor_bgp role renders it: from the first ToR's
        # tor_bgp_options (the role renders every ToR's config once, run_once). A host whose ToR is not in the
        # inventory is read from its own variables.
        required = {}
        md5 = []
        fleet_src = next((t for t in tors if t in hostvars), None)
        for h, mh in gpu.items():
            if not isinstance(mh, dict):
                continue
            tor = mh.get("tor")
            src = tor if tor in hostvars else h
            options_src = fleet_src if src == tor and fleet_src else src
            if options_src not in required:
                options = self._fact(task_vars, options_src, "tor_bgp_options") or {}
                required[options_src] = (options.get("md5") if isinstance(options, dict) else None) == "required"
            if required[options_src]:
                md5.append({"host": h, "required": True, "host_key": bool(keys_of(h).get(h)),
                            "tor_key": bool(keys_of(src).get(h))})
        out = decide.inventory(gpu, tors, groups.get("spines") or [], topology_gpu_hosts=topology_gpu, md5=md5)
        out.update(hosts=[dict(name=h, rack=gpu[h].get("rack")) for h in names if isinstance(gpu[h], dict)],
                   rack_tors=rack_tors, fabric=fabric,
                   gpu_hosts=names)
        out["ansible_facts"] = dict(rollout_fabric=fabric, rollout_rack_tors=rack_tors,
                                    rollout_max_unreachable=args["max_unreachable"])
        if out["problems"]:
            out.update(failed=True, msg="inventory %s: %s. Need group gpu_hosts with multinic_host on every host (the "
                       "netscale.multinic.fabric inventory plugin sets it), every ToR in group tors and at least one "
                       "spine; nothing was changed" % (args.get("topology") or "", "; ".join(out["problems"])))
        elif out["md5_missing"]:
            out.update(failed=True, msg=(
                "tor_bgp_md5_keys: no TCP-MD5 key for GPU host(s) %s while tor_bgp_options.md5 is 'required' on their "
                "ToR; nothing was changed. Fix: add tor_bgp_md5_keys['<host>'] for each of them in the inventory's "
                "vault (the lab: scripts/setup.sh writes the vault password, inventories/lab/group_vars/all), or set "
                "tor_bgp_options.md5 to 'optional'." % ", ".join(out["md5_missing"])))
        else:
            decide.parse_budget(args["max_unreachable"])   # the wave budget, checked with the inventory
        return out

    def _names(self, args, task_vars):
        scope.check_mode_value(args["scope"])   # before anything is named or taken
        out = decide.names(time.time(), args.get("rollout_id") or "", task_vars.get("awx_job_id"),
                           task_vars.get("awx_workflow_job_id"))
        out["topology"] = args.get("topology") or self._topology(task_vars)
        root = os.path.realpath(args["report_root"])
        out.update(report_dir=os.path.join(root, out["run_id"]),
                   journal_root=os.path.realpath(args.get("journal_dir") or os.path.join(args["report_root"], "journal")))
        out["ansible_facts"] = dict(rollout_run_id=out["run_id"], rollout_started=out["started"],
                                    rollout_journal_id=out["journal_id"], rollout_journal_job=out["job"],
                                    rollout_report_dir=out["report_dir"], rollout_journal_root=out["journal_root"],
                                    rollout_topology=out["topology"], rollout_record_to=dict(
                                        dir=out["journal_root"], rollout_id=out["journal_id"], job=out["job"],
                                        report_dir=out["report_dir"]))
        return out

    def _topology(self, task_vars):
        """The topology file the inventory came from (under AWX a synced copy; an AWX slice may hold no GPU host):
        ``multinic_topology_file`` of the first host of the first fabric group that has one (never a pass over
        every host's variables), else the first inventory source."""
        groups = task_vars.get("groups") or {}
        for group in ("gpu_hosts", "tors", "spines", "all"):
            hosts = groups.get(group) or []
            if hosts:
                found = self._fact(task_vars, hosts[0], "multinic_topology_file", _MISSING)
                if found is not _MISSING:
                    return found
        return (task_vars.get("ansible_inventory_sources") or [""])[0]

    def _budget(self, args, _task_vars):
        kind, value = decide.parse_budget(args["max_unreachable"])
        return {"kind": kind, "value": str(value), "budget": value if kind == "count" else None}

    _PER_HOST = ("lost", "error", "failed", "gates", "gates_results", "warnings", "restored", "reach", "state_after")

    @staticmethod
    def _fact_names(args):
        """Which host variable holds each per-host fact: the module's defaults, overridden by O(facts)."""
        return dict(ARGUMENT_SPEC["facts"]["default"], **args["facts"])

    def _host_facts(self, args, task_vars, hosts):
        names = self._fact_names(args)
        return dict((h, dict((k, self._fact(task_vars, h, names[k])) for k in self._PER_HOST)) for h in hosts)

    def _account(self, args, task_vars):
        facts = self._host_facts(args, task_vars, args["hosts"])
        step = args["step"]
        # marked lost: by a fact of the host, or by its reachability check (its registered ping, read by name)
        marks = {} if step == "gates" else decide.reach_marks(
            args["hosts"], dict((h, f["reach"]) for h, f in facts.items()), args["known"], step)
        marked = [h for h in args["hosts"] if self._truthy(facts[h]["lost"]) or h in marks]
        errors = dict((h, marks.get(h) or facts[h]["error"] or "") for h in args["hosts"])
        acct = decide.account(args["hosts"], args["batch"], marked, args["known"], args["max_unreachable"],
                              step, errors=errors)
        acct["journal"] = decide.records(step, args["wave"], args["hosts"], args["batch"], acct,
                                         deploy_ran=args["deploy_ran"])
        acct.update(marks=marks, hosts=list(args["hosts"]))
        if step == "start":
            acct["started"] = time.time()
            acct["events"] = [{"event": "wave", "data": {
                "name": args["wave"], "hosts": list(args["hosts"]), "status": "running", "unreachable": acct["lost"],
                "max_unreachable": acct["budget"], "started": acct["started"]}}]
        return acct

    def _verdict(self, args, task_vars):
        out = {}
        over_budget = args["over_budget"]
        if args["hosts"]:   # the wave's hosts: those Ansible dropped during the gates count as lost first
            out = self._account(dict(args, step="gates"), task_vars)
            over_budget = out["over_budget"]
        facts = self._host_facts(args, task_vars, args["batch"])
        out.update(decide.verdict(args["batch"], dict((h, f["gates"]) for h, f in facts.items()),
                                  [h for h, f in facts.items() if self._truthy(f["failed"])], over_budget=over_budget,
                                  check_mode=bool(self._task.check_mode), over_budget_before=args["over_budget_before"]))
        # what a failed wave writes before its rollback, and snapshots: its hosts' record, their ToRs
        out["failed_journal"] = [decide.failed_record(args["wave"], args["batch"],
                                                      dict((h, f["error"]) for h, f in facts.items()))]
        host_var = self._fact_names(args)["host"]
        tors = [(self._fact(task_vars, h, host_var) or {}).get("tor") for h in out["failed_hosts"]]
        out["failed_tors"] = [t for t in dict.fromkeys(tors) if t is not None]
        if args["all_waves"] and out["verdict"] not in ("pass", "check"):   # an inconclusive one may yet fail
            out["restore"] = decide.restore_tors(args["all_waves"], args["wave"], args["rack_tors"], args["tors"],
                                                 args["skip_tors"])
        return out

    def _wave_end(self, args, task_vars):
        wave_hosts = args["hosts"]
        facts = self._host_facts(args, task_vars, wave_hosts)
        errors = decide.host_errors(wave_hosts, dict((h, f.get("error")) for h, f in facts.items()),
                                    args["start"].get("marks"), args["deploy"].get("marks"))
        per_host = dict((h, {"error": errors[h], "warnings": f.get("warnings"), "gates": f.get("gates_results"),
                             "restored": self._restored(f)}) for h, f in facts.items())
        started = args["started"] if args["started"] is not None else args["start"].get("started")
        restored = args["restored_tors"]
        if restored is None:   # a failed wave restored the ToRs its verdict named
            restored = (args["gates"].get("restore") or []) if args["wave_verdict"] == "fail" else []
        out = decide.wave_end(args["wave"], wave_hosts, args["batch"], args["deploy"], args["gates"],
                              args["wave_verdict"], args["failed_hosts"], per_host, restored,
                              started=started, ended=round(time.time(), 9))
        if args["wave_verdict"] == "fail":   # undone by now: hosts rolled back, ToRs restored
            out["journal"] = decide.rolled_back(args["wave"], args["batch"], restored) + out["journal"]
        wave_event = {"event": "wave", "data": out["report"]}
        if args["share_tolerance"] is not None:
            wave_event["share_tolerance"] = args["share_tolerance"]
        out["events"] = [wave_event]
        if args["wave_verdict"] == "fail":
            run = args["run"] or self._run_of(args["record_to"])
            finish, out["stop"] = decide.stop(args["wave"], args["failed_hosts"], args["gates"], run.get("journal"),
                                              run.get("report_dir"), run.get("rollout_id"))
            out["events"].append({"event": "finish", "data": finish})
        return out

    @staticmethod
    def _run_of(where):
        """The run recorded to (O(record_to)), as a failed wave's messages name it: journal file, report, rollout."""
        if not where.get("dir"):
            return {}
        return {"journal": journal.job_path(where["dir"], where["rollout_id"], where["job"]),
                "report_dir": where.get("report_dir"), "rollout_id": where["rollout_id"]}

    @staticmethod
    def _restored(f):
        """The state after a rollback equals the one before: the registered compare (skipped - not compared)."""
        after = f.get("state_after")
        if isinstance(after, dict) and not after.get("skipped"):
            return after.get("restored_exactly", "not compared: a state dump failed")
        return f.get("restored")

    def _frr(self, args, task_vars):
        name = self._fact_names(args)["frr"]
        out = {"down": decide.frr_problems(args["hosts"], dict(
            (h, self._fact(task_vars, h, name)) for h in args["hosts"]))}
        if out["down"]:
            out["journal"], out["events"], out["stop"] = decide.preflight_stop(out["down"], self._rollout_id(args))
        return out

    def _tor_configured(self, args, _task_vars):
        out = decide.tor_configured(args["tor"], args["rack"], args["changed"], args["backup_dir"], args["results"])
        if out["msg"]:   # not recorded: the phase fails, and its rescue records the ToR restored
            out["failed"] = True
        return out

    def _tor_failed(self, args, _task_vars):
        return decide.tor_failed(args["tor"], args["backup_dir"], args["failed_task"], args["failed_msg"],
                                 self._rollout_id(args))

    @staticmethod
    def _rollout_id(args):
        """The rollout a stop message names: O(rollout_id), else the one recorded to."""
        return args["rollout_id"] or args["record_to"].get("rollout_id") or ""

    def _approve(self, args, _task_vars):
        out = {"verdict": decide.approve(args["wave_verdict"], args["approved"], args["user_input"])}
        if out["verdict"] == "fail":   # recorded before the rollback, which its record never blocks
            out.update(journal=list(args["failed_journal"]), _never_blocks=True)
        return out

    def _finish(self, args, _task_vars):
        out = decide.finish(bool(self._task.check_mode), args["hosts"], args["scope_message"])
        where = args["record_to"]
        if where.get("dir") and where.get("rollout_id") and where.get("job"):   # else recording says what is missing
            out["where"] = "rollout %s (run %s) %s: %s; journal %s" % (
                where["rollout_id"], args["run_id"], out["status"],
                os.path.join(where.get("report_dir") or "", model.MD_NAME),
                self._run_of(where)["journal"])
        return out

    def _restore_tors(self, args, _task_vars):
        return {"restore": decide.restore_tors(args["all_waves"], args["wave"], args["rack_tors"], args["tors"],
                                               args["skip_tors"])}

    def _host_var_reader(self, hostvars, raws):
        """``own(host, name)``: a variable the inventory sets on the host itself (multinic_host, multinic_rack).

        Ansible's per-host variable pass (``hostvars.raw_get``: group variables, vars plugins, facts) costs about
        a millisecond per host, 30 s for a region; the fabric inventory plugin sets these on the host, so they
        are read from the inventory's host first. Ansible has no public handle on it: without one, or when the
        host does not carry the variable itself, the per-host pass decides (``raws`` caches it)."""
        inventory = getattr(hostvars, "_inventory", None)
        get_host = getattr(inventory, "get_host", None)

        def own(host, name):
            host_obj = get_host(host) if get_host is not None else None
            own_vars = getattr(host_obj, "vars", None)
            if isinstance(own_vars, dict) and name in own_vars:
                return own_vars[name]
            if host not in raws:
                raws[host] = self._raw(hostvars, host)
            return raws[host].get(name)
        return own

    def _placement(self, multinic_host):
        """``{rack, tor}`` of a host's (untemplated) ``multinic_host``, or None when it has none."""
        if not isinstance(multinic_host, dict):
            multinic_host = self._templar.template(multinic_host)   # a template or a variable's name
        if not isinstance(multinic_host, dict):
            return None
        return dict((k, self._templar.template(multinic_host.get(k))) for k in ("rack", "tor"))

    @staticmethod
    def _raw(hostvars, host):
        """A host's variables, untemplated (one variable-manager pass per host)."""
        raw = hostvars.raw_get(host) if host in hostvars else {}
        return raw if isinstance(raw, dict) else {}

    @staticmethod
    def _truthy(value):
        if isinstance(value, str):
            return value.strip().lower() in ("true", "yes", "1")
        return bool(value)
