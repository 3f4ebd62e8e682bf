# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's decisions, as pure functions (no Ansible imports, no I/O): the playbooks only order the
steps and call ``netscale.multinic.rollout_decide``, which calls these.

- :func:`parse_budget` / :func:`budget`: ``rollout_max_unreachable``, a host count or a percentage of the
  wave (rounded down), parsed once in the preflight and applied to each wave.
- :func:`account`: lost-host accounting of a wave at a step (wave start, after the deploy, after the
  gates): which hosts count as unreachable (marked by a failed reachability check, or dropped by Ansible),
  whether the wave is over its budget, and the journal records of the hosts lost at this step.
- :func:`verdict`: the wave verdict from every host's gate verdict, the deploy errors and the budget;
  :func:`approve` settles an inconclusive one.
- :func:`inventory`: the preflight's inventory sanity and TCP-MD5 checks over the inventory data, and
  whether this job (an AWX fleet slice) holds no GPU host of the recorded waves (nothing to deploy).
- :func:`restore_tors`: the ToRs a failed wave restores.
- :func:`preflight_stop`, :func:`tor_configured`, :func:`tor_failed`: the preflight stop, a ToR's spine gates and
  records, a failed ToR phase (journal records, report events, the message a job stops with).

Resume eligibility lives in :mod:`.journal` (``open_plan``), change scope in :mod:`.scope`, wave planning
in :mod:`.waves`.
"""

from __future__ import annotations

import re
from fractions import Fraction

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.rollout import waves as waves_mod

VERDICTS = ("pass", "fail", "inconclusive", "skipped", "check")
_BUDGET_RE = re.compile(r"^([0-9]+)(\.[0-9]+)?%$|^[0-9]+$")
BUDGET_FIX = ("use a host count per wave (0, 1, ...) or a percentage of the wave from 0% to 100% like '10%'; "
              "nothing was changed")


class DecideError(MultinicError):
    """A rollout setting the decisions cannot use (names the field, the value and the fix)."""


def parse_budget(spec):
    """``rollout_max_unreachable`` -> ``("count", int)`` or ``("percent", Fraction)`` (exact, no float).
    None means 0. Refused: booleans, negatives, decimals without '%', percentages above 100."""
    if spec is None:
        spec = 0
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        raise DecideError("rollout_max_unreachable=%r: %s" % (spec, BUDGET_FIX))
    s = str(spec)
    if not _BUDGET_RE.match(s):
        raise DecideError("rollout_max_unreachable=%r: %s" % (spec, BUDGET_FIX))
    if s.endswith("%"):
        pct = Fraction(s[:-1])
        if pct > 100:
            raise DecideError("rollout_max_unreachable=%r: above 100%% of the wave; %s" % (spec, BUDGET_FIX))
        return ("percent", pct)
    return ("count", int(s))


def budget(spec, wave_size):
    """Hosts of a wave of ``wave_size`` hosts that may be unreachable: the count, or the percentage of the
    wave rounded down (exactly: 10% of 29 hosts is 2)."""
    kind, value = parse_budget(spec)
    if isinstance(wave_size, bool) or not isinstance(wave_size, int) or wave_size < 0:
        raise DecideError("wave size %r: a host count >= 0" % (wave_size,))
    if kind == "count":
        return value
    return int(value * wave_size // 100)


def _ordered(hosts, members):
    members = set(members)
    return [h for h in hosts if h in members]


def account(wave_hosts, batch, marked, known=(), max_unreachable=0, step="start", errors=None):
    """Lost-host accounting of one wave at one step.

    ``wave_hosts``: the hosts of the wave (order kept); ``batch``: the hosts still in Ansible's play batch
    (a host Ansible dropped is gone from it); ``marked``: hosts a reachability check marked lost (so far);
    ``known``: hosts already counted unreachable at an earlier step; ``max_unreachable``: the budget spec;
    ``errors``: ``{host: why}`` of the marked hosts. ``step``: ``start``, ``deploy`` or ``gates``.

    Returns ``{lost, lost_now, dropped, over_budget, budget, deploy_ran, errors, messages}``: every
    host counted unreachable (marked or dropped, wave order), those new at this step, those dropped by
    Ansible, whether more are lost than the budget allows, the budget in hosts, whether the deploy runs (at
    the start: within the budget), ``{host: why}`` of the hosts new at this step, and one line per dropped
    host for the report."""
    if step not in ("start", "deploy", "gates"):
        raise DecideError("step=%r: use start, deploy or gates" % (step,))
    wave_hosts = list(wave_hosts or [])
    limit = budget(max_unreachable, len(wave_hosts))
    known = list(known or [])
    errors = dict(errors or {})
    batch = set(batch or [])
    dropped = [] if step == "start" else [h for h in wave_hosts if h not in batch and h not in known]
    # after the gates the marks are not read again: what was counted stays, the newly dropped are added
    base = known if step == "gates" else _ordered(wave_hosts, set(marked or []) | set(known))
    lost = base + [h for h in dropped if h not in base]
    lost_now = [h for h in lost if h not in known]
    why = {"deploy": "dropped by Ansible during the deploy (unreachable or failed outside the shielded tasks)",
           "gates": "dropped by Ansible during the gates (unreachable or failed)"}.get(step, "")
    said = {"deploy": why, "gates": "dropped by Ansible during the gates"}.get(step, "")
    new_errors = dict((h, why if h in dropped else errors.get(h, "")) for h in lost_now)
    return {"lost": lost, "lost_now": lost_now, "dropped": dropped, "over_budget": len(lost) > limit,
            "budget": limit, "deploy_ran": len(lost) <= limit, "errors": new_errors,
            "messages": ["%s: %s" % (h, said) for h in dropped]}


def verdict(batch, host_verdicts, failed_hosts=(), over_budget=False, check_mode=False, over_budget_before=None):
    """The wave verdict over the hosts still in the batch (the reachable ones).

    ``host_verdicts``: ``{host: gate verdict}`` (the health_gates role's; missing when the gates did not
    run); ``failed_hosts``: hosts whose deploy failed; ``over_budget_before``: over the unreachable budget
    before the gates (the gates did not run: every host fails), default ``over_budget``; ``over_budget``:
    after the gates. fail: a host failed (deploy or gate), the wave is over its unreachable budget, or no
    host is left to judge (missing evidence is never a pass); inconclusive: a gate could not decide; else
    check (check mode) or pass. Returns ``{verdict, failed_hosts, host_verdicts}``: ``failed_hosts`` are
    the hosts whose verdict is neither pass nor skipped, batch order."""
    batch = list(batch or [])
    host_verdicts = dict(host_verdicts or {})
    failed = set(failed_hosts or [])
    before = over_budget if over_budget_before is None else over_budget_before
    per_host = []
    for h in batch:
        v = "fail" if (h in failed or before) else host_verdicts.get(h)
        if v not in VERDICTS:
            v = "fail"   # a host without a gate verdict has no evidence of health
        per_host.append((h, v))
    verdicts = [v for _h, v in per_host]
    if "fail" in verdicts or over_budget or not verdicts:
        out = "fail"
    elif "inconclusive" in verdicts:
        out = "inconclusive"
    else:
        out = "check" if check_mode else "pass"
    return {"verdict": out, "failed_hosts": [h for h, v in per_host if v not in ("pass", "skipped")],
            "host_verdicts": dict(per_host)}


def approve(wave_verdict, approved=False, user_input=None):
    """An inconclusive verdict passes with consent (``health_gates_inconclusive_approved``) or an operator's
    'yes', and fails otherwise; any other verdict is kept."""
    if wave_verdict != "inconclusive":
        return wave_verdict
    return "pass" if approved or str(user_input or "").strip().lower() == "yes" else "fail"


def finish(check_mode, deploy_hosts, scope_message=None):
    """A job that reached its end: its status (``check`` in check mode, else ``passed``) and the report's message -
    the change scope's with ``rollout_scope=changed``, else none when it deployed hosts, else why it had nothing to
    deploy. The journal's ``finished`` event and the report's ``finish`` event (with the journal's summary)."""
    status = "check" if check_mode else "passed"
    if scope_message is not None:
        message = scope_message
    elif deploy_hosts:
        message = ""
    else:
        message = ("nothing to deploy: this job holds no GPU host of the waves it runs (an AWX fleet slice given other "
                   "hosts)")
    return {"status": status, "journal": [{"_record": "event", "kind": "finished", "status": status}],
            "events": [{"event": "finish", "journal_summary": True, "data": {"status": status, "message": message}}]}


def inventory(gpu_hosts, tors, spines, topology_gpu_hosts=None, md5=None):
    """Preflight checks over the inventory data, before anything is changed.

    ``gpu_hosts``: ``{name: multinic_host or None}`` of this job's inventory; ``tors``, ``spines``: names;
    ``topology_gpu_hosts``: GPU host names the topology file holds (None: same as the inventory);
    ``md5``: ``[{host, required, host_key, tor_key}]`` (booleans: the host's ToR requires TCP-MD5, a key
    for the host is set on the host and on its ToR).

    A job whose inventory holds no GPU host while the topology has some is an AWX fleet slice (AWX gave it
    only infrastructure): it has nothing to deploy, which is not an error. Returns ``{problems: [...],
    md5_missing: [...], slice_empty: bool, racks, tors}``."""
    gpu_hosts = dict(gpu_hosts or {})
    tors = list(tors or [])
    problems = []
    without = sorted(h for h, mh in gpu_hosts.items() if not isinstance(mh, dict))
    placed = [mh for mh in gpu_hosts.values() if isinstance(mh, dict)]
    racks = list(dict.fromkeys(mh.get("rack") for mh in placed))       # in order, once each
    rack_tors = list(dict.fromkeys(mh.get("tor") for mh in placed))
    slice_empty = not gpu_hosts and bool(topology_gpu_hosts)
    if not gpu_hosts and not slice_empty:
        problems.append("no host in group gpu_hosts")
    if without:
        problems.append("GPU host(s) without multinic_host: %s" % ", ".join(without))
    in_tors = set(tors)
    missing_tors = [t for t in rack_tors if t not in in_tors]
    if missing_tors:
        problems.append("ToR(s) %s not in group tors (has %s)" % (", ".join(map(str, missing_tors)), tors))
    if not list(spines or []):
        problems.append("no host in group spines")
    md5_missing = [m["host"] for m in (md5 or []) if m.get("required") and not (m.get("host_key") and m.get("tor_key"))]
    return {"problems": problems, "md5_missing": md5_missing, "slice_empty": slice_empty,
            "racks": racks, "tors": rack_tors}


def restore_tors(all_waves, failed_wave, rack_tors, rollout_tors, skip_tors=False):
    """ToRs a failed wave restores: those of racks none of whose hosts passed an earlier wave
    (:func:`.waves.racks_to_restore`; every wave before the failed one passed or was skipped on resume),
    only ToRs this rollout configured; none in a job that skips the ToRs (another slice may be mid-wave:
    playbooks/rollback.yml restores them)."""
    if skip_tors:
        return []
    all_waves = list(all_waves or [])
    names = [w["name"] for w in all_waves]
    if failed_wave not in names:
        raise DecideError("wave %r: not among the rollout's waves (%s)" % (failed_wave, ", ".join(names)))
    racks = waves_mod.racks_to_restore(all_waves, failed_wave, names[:names.index(failed_wave)])
    rack_tors = dict(rack_tors or {})
    mine = set(rollout_tors or [])
    return [rack_tors[r] for r in racks if r in rack_tors and rack_tors[r] in mine]


def records(step, wave, wave_hosts, batch, acct, deploy_ran=True):
    """Journal records (``rollout_journal`` items) of a wave step from its :func:`account`: at the start the
    unreachable hosts, the hosts deploying (within the budget) and the wave running; after the deploy the
    hosts lost during it and the hosts deployed; after the gates the hosts Ansible dropped during them."""
    items = []
    lost_now = acct["lost_now"]
    if step == "start":
        if lost_now:
            items.append({"_record": "host", "hosts": lost_now, "state": "unreachable", "wave": wave,
                          "errors": acct["errors"]})
        if not acct["over_budget"]:
            items.append({"_record": "host", "hosts": [h for h in wave_hosts if h not in acct["lost"]],
                          "state": "deploying", "wave": wave})
        items.append({"_record": "wave", "name": wave, "status": "running", "hosts": list(wave_hosts),
                      "unreachable": acct["lost"], "max_unreachable": acct["budget"]})
    elif step == "deploy":
        if lost_now:
            items.append({"_record": "host", "hosts": lost_now, "state": "unreachable", "wave": wave,
                          "errors": acct["errors"]})
        if deploy_ran:
            items.append({"_record": "host", "hosts": [h for h in batch if h not in lost_now], "state": "deployed",
                          "wave": wave})
    elif lost_now:
        items.append({"_record": "host", "hosts": lost_now, "state": "unreachable", "wave": wave,
                      "error": "dropped by Ansible during the gates (unreachable or failed)"})
    return items


def names(now, rollout_id="", awx_job_id=None, awx_workflow_job_id=None):
    """Names of a run: ``run_id`` (UTC time, ``-job<awx job id>`` under AWX), the rollout's ``journal_id`` (a given
    ``rollout_id`` resumes it; AWX workflow jobs share ``awx-wf-<workflow job id>``; else this run's id) and this
    job's key ``job`` (``awx-job-<id>`` or ``run-<run id>``). ``now``: seconds since the epoch."""
    import time as _time
    awx = None if awx_job_id in (None, "") else str(awx_job_id)
    run_id = _time.strftime("%Y%m%dT%H%M%SZ", _time.gmtime(now)) + ("-job" + awx if awx else "")
    if str(rollout_id or ""):
        journal_id = str(rollout_id)
    elif awx_workflow_job_id not in (None, ""):
        journal_id = "awx-wf-%s" % awx_workflow_job_id
    else:
        journal_id = run_id
    return {"run_id": run_id, "journal_id": journal_id, "job": ("awx-job-" + awx) if awx else "run-" + run_id,
            "started": now}


STATUS = {"pass": "passed", "check": "check", "fail": "rolled_back"}


def wave_end(wave, wave_hosts, batch, acct_deploy, acct_gates, wave_verdict, failed_hosts, host_facts, restored_tors=(),
             started=None, ended=None):
    """The wave's report event and its journal records once its verdict is settled. ``host_facts``: per host
    ``{error, warnings, gates, restored}`` (deploy/reachability error, consented weakenings, gate results, state
    after a rollback equal to the one before)."""
    def fact(h, key, default):
        value = (host_facts.get(h) or {}).get(key)
        return default if value is None else value

    gates = [g for h in batch for g in (fact(h, "gates", []) or [])]
    report = {"name": wave, "hosts": list(wave_hosts), "unreachable": acct_gates["lost"],
              "max_unreachable": acct_gates["budget"], "over_budget": acct_gates["over_budget"],
              "status": STATUS.get(wave_verdict, wave_verdict), "started": started, "ended": ended,
              "failed_hosts": list(failed_hosts),
              "errors": [fact(h, "error", "") for h in wave_hosts if fact(h, "error", "")]
              + acct_deploy["messages"] + acct_gates["messages"],
              "warnings": [w for h in wave_hosts for w in (fact(h, "warnings", []) or [])],
              "gates": gates,
              "rollback": {} if wave_verdict != "fail" else {
                  "hosts": list(batch), "tors_restored": list(restored_tors or []),
                  "restored_exactly": dict((h, fact(h, "restored", "not compared")) for h in batch)}}
    journal = ([{"_record": "host", "hosts": list(batch), "state": "passed", "wave": wave}]
               if wave_verdict == "pass" else [])
    journal += [dict(g, _record="gate", wave=wave) for g in gates]
    journal.append({"_record": "wave", "name": wave, "status": wave_verdict, "hosts": list(wave_hosts),
                    "unreachable": acct_gates["lost"], "over_budget": acct_gates["over_budget"]})
    return {"report": report, "journal": journal}


def rolled_back(wave, batch, restored_tors):
    """A failed wave's records once it is undone: its hosts (``batch``, those left after the rollback) rolled back,
    the ToRs it restored (one record each) restored. Written before the wave's own records."""
    return [{"_record": "host", "hosts": list(batch), "state": "rolled_back", "wave": wave},
            {"_record": "tor", "names": list(restored_tors or []), "state": "restored"}]


def truncate(text, length=255, end="...", leeway=5):
    """Jinja's ``truncate`` filter (words kept whole), so a message built here reads as the playbook's did."""
    text = str(text)
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def _check_failed(result):
    return isinstance(result, dict) and bool(result.get("unreachable") or result.get("failed"))


def reach_marks(hosts, results, known=(), step="start"):
    """Hosts whose reachability check (a ``ping`` result each, ``results``: ``{host: result}``) failed or found
    them unreachable, not counted before (``known``), with why: ``{host: "unreachable at wave start: <msg>"}``
    (``after the deploy`` at ``step=deploy``). A skipped check (the deploy did not run) marks nothing."""
    when = {"start": "at wave start", "deploy": "after the deploy"}[step]
    known = set(known or [])
    results = results or {}
    return dict((h, "unreachable %s: %s" % (when, truncate((results.get(h) or {}).get("msg") or "", 200)))
                for h in hosts or [] if h not in known and _check_failed(results.get(h)))


def frr_problems(hosts, results):
    """Devices whose FRR did not answer ``vtysh -c 'show bgp summary json'`` (``results``: ``{host: the
    command's result or None}``): ``"<host>: <stderr, msg or 'no output'>"`` each, ``"<host>: not checked"`` for a
    device without a result."""
    out = []
    for h in hosts or []:
        r = results.get(h)
        if not isinstance(r, dict):
            out.append("%s: not checked" % h)
            continue
        rc = r.get("rc", 1)
        if not r.get("unreachable") and not rc and str(r.get("stdout") or "").strip():
            continue
        why = str(r.get("stderr") or "").strip() or str(r.get("msg") or "").strip() or "no output"
        out.append("%s: %s" % (h, truncate(why, 200)))
    return out


def host_errors(wave_hosts, errors, start_marks=None, deploy_marks=None):
    """Each host's error for the wave's report: unreachable after the deploy, else its own error (a deploy
    failure), else unreachable at wave start."""
    start_marks, deploy_marks, errors = start_marks or {}, deploy_marks or {}, errors or {}
    return dict((h, deploy_marks.get(h) or errors.get(h) or start_marks.get(h) or "") for h in wave_hosts)


def failed_record(wave, batch, errors):
    """The journal record of a failed wave's hosts (written before its rollback)."""
    return {"_record": "host", "hosts": list(batch), "state": "failed", "wave": wave,
            "errors": dict((h, (errors or {}).get(h) or "") for h in batch)}


def stop(wave, failed_hosts, acct_gates, journal_path, report_dir, rollout_id):
    """A failed wave's report ``finish`` data and the message the run stops with."""
    lost, limit = acct_gates["lost"], acct_gates["budget"]
    finish = {"status": "failed", "failed_wave": wave,
              "message": "wave %s failed on %s%s; rolled back; earlier waves stay; journal %s" % (
                  wave, list(failed_hosts), (", unreachable %s (budget %s)" % (lost, limit)) if lost else "",
                  journal_path)}
    message = ("wave %s failed on %s and was rolled back; report: %s/report.md%s. Fix, then resume with -e rollout_id=%s "
               "(re-runs wave %s), or undo the rollout with playbooks/rollback.yml -e rollout_id=%s" % (
                   wave, list(failed_hosts), report_dir,
                   ("; unreachable %s beyond rollout_max_unreachable=%s" % (lost, limit)) if acct_gates["over_budget"] else "",
                   rollout_id, wave, rollout_id))
    return finish, message


def preflight_stop(down, rollout_id):
    """Devices whose FRR does not answer (:func:`frr_problems`) stop a job in its preflight, before any change: the
    journal event, the report's ``finish`` event and the message the job stops with."""
    where = "; ".join(down)
    journal = [{"_record": "event", "kind": "preflight_failed", "devices": list(down)}]
    events = [{"event": "finish", "data": {
        "status": "failed", "failed_wave": "preflight",
        "message": "FRR not answering on %s; nothing was changed by this job" % where}}]
    stop = ("FRR not answering on %s. Nothing was changed by this job. Start the daemon (e.g. systemctl restart frr on "
            "the device), then resume with -e rollout_id=%s, or undo what earlier jobs did with playbooks/rollback.yml "
            "-e rollout_id=%s." % (where, rollout_id, rollout_id))
    return journal, events, stop


def tor_configured(tor, rack, changed, backup_dir, results):
    """A ToR's policy applied: the spine_task_routes gates run after it (``results``: the registered loop's results,
    one per spine; skipped ones - check mode - carry no verdict) with ``target: spines``; when a spine carries task
    routes (the ToR policy leaks) ``msg`` says why and the ToR phase fails; else the ToR's ``configured`` journal
    record and report event (``changed``: its running config differs from the one before)."""
    gates = [dict(r, target="spines") for r in results or [] if isinstance(r, dict) and "verdict" in r]
    failing = [r.get("values") for r in gates if r["verdict"] != "pass"]
    backup = "%s/%s.conf" % (backup_dir, tor)
    return {"gates": gates, "msg": "spine_task_routes failed after %s: %s" % (tor, failing) if failing else "",
            "journal": [{"_record": "tor", "name": tor, "state": "configured", "backup": backup}],
            "events": [{"event": "tor", "data": {"name": tor, "rack": rack, "changed": bool(changed),
                                                 "backup": backup, "gates": gates}}]}


def tor_failed(tor, backup_dir, failed_task, failed_msg, rollout_id):
    """A ToR whose phase failed is restored from its pre-change copy and the rollout stops: the error, the journal
    record (``restored``), the report's ``finish`` event and the stop message. ToRs of earlier racks keep the new
    policy; no host was deployed yet."""
    error = "%s: '%s' failed: %s" % (tor, failed_task or "?", truncate(failed_msg or "", 300))
    backup = "%s/%s.conf" % (backup_dir, tor)
    journal = [{"_record": "tor", "name": tor, "state": "restored", "error": error, "backup": backup}]
    events = [{"event": "finish", "data": {
        "status": "failed", "failed_wave": "tor",
        "message": "%s; restored from its pre-change copy; the rollout stopped" % error}}]
    stop = ("%s. The ToR was restored from its pre-change copy (%s); ToRs of earlier racks keep the new policy (hosts "
            "were not deployed yet). Fix, then resume with -e rollout_id=%s (the original copies are kept), or undo "
            "the ToRs with playbooks/rollback.yml -e rollout_id=%s." % (error, backup_dir, rollout_id, rollout_id))
    return {"error": error, "journal": journal, "events": events, "stop": stop}
