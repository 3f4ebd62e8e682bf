# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rollout waves: canary (hosts, racks or a percentage; default the first rack) then fleet waves
given as cumulative coverage of the fleet (``['5%', '25%', '100%']``: after each wave that share of
all hosts is done). Output feeds Ansible ``serial`` (batch sizes) and the host order of the play.

Also decides which ToRs a failed wave restores: racks none of whose hosts passed in an earlier wave.
"""

from __future__ import annotations

import math

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError


class WaveError(MultinicError):
    """Bad wave specification (names the field, the value and the fix)."""


def _fraction(value, field):
    if isinstance(value, bool):
        raise WaveError("%s=%r: use a percentage like '25%%' or a host count" % (field, value))
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            f = float(value.strip()[:-1]) / 100.0
        except ValueError:
            raise WaveError("%s=%r: not a percentage; use e.g. '25%%'" % (field, value))
        if not 0 < f <= 1:
            raise WaveError("%s=%r: a percentage must be in (0%%, 100%%]" % (field, value))
        return ("fraction", f)
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise WaveError("%s=%r: use a percentage like '25%%' or a host count" % (field, value))
    if n < 1:
        raise WaveError("%s=%r: a host count must be >= 1" % (field, value))
    return ("count", n)


def plan_waves(hosts, canary=None, waves=("5%", "25%", "100%"), start_wave=None, end_wave=None):
    """``hosts``: ordered list of ``{"name", "rack"}`` (inventory order). ``canary``: None (first
    rack), ``{"racks": [...]}``, ``{"hosts": [...]}`` or ``{"percent": "10%"}``. ``waves``: cumulative
    coverage after each fleet wave (percentages or host counts); the last is forced to cover every host.
    ``start_wave``: resume from this wave name (earlier waves are listed as ``skipped``); ``fleet`` =
    the first wave after the canary. ``end_wave``: stop after this wave (later ones are ``deferred``);
    AWX runs the canary job with ``end_wave=canary`` and the fleet job with ``start_wave=fleet``.

    Returns ``{"waves": [{"name", "hosts", "racks"}], "order": [...], "serial": [...], "skipped": [...]}``.
    """
    if not hosts:
        raise WaveError("rollout: no GPU hosts in the play; check the inventory (group gpu_hosts) and --limit")
    names = [h["name"] for h in hosts]
    rack_of = dict((h["name"], h.get("rack")) for h in hosts)
    # order-preserving sets: a region has 30K hosts in 10K racks (list membership tests were quadratic)
    racks = list(dict.fromkeys(h.get("rack") for h in hosts))
    rack_pos = dict((r, i) for i, r in enumerate(racks))
    canary = canary or {}
    if not isinstance(canary, dict):
        raise WaveError("rollout_canary=%r: use {racks: [...]}, {hosts: [...]} or {percent: '10%%'}" % (canary,))
    unknown_keys = sorted(set(canary) - {"racks", "hosts", "percent"})
    if unknown_keys:
        raise WaveError("rollout_canary: unknown key(s) %s; use racks, hosts or percent" % ", ".join(unknown_keys))
    if len([k for k in ("racks", "hosts", "percent") if canary.get(k)]) > 1:
        raise WaveError("rollout_canary=%r: give only one of racks, hosts, percent" % (canary,))
    if canary.get("hosts"):
        bad = [h for h in canary["hosts"] if h not in rack_of]
        if bad:
            raise WaveError("rollout_canary.hosts: %s not among the rollout's GPU hosts (%s)"
                            % (", ".join(bad), ", ".join(names[:10])))
        wanted = set(canary["hosts"])
        canary_hosts = [n for n in names if n in wanted]
    elif canary.get("percent"):
        kind, v = _fraction(canary["percent"], "rollout_canary.percent")
        k = max(1, int(math.ceil(v * len(names)))) if kind == "fraction" else min(v, len(names))
        canary_hosts = names[:k]
    else:
        want = canary.get("racks") or racks[:1]
        bad = [r for r in want if r not in rack_pos]
        if bad:
            raise WaveError("rollout_canary.racks: %s not among the racks of the rollout's hosts (%s)"
                            % (", ".join(str(b) for b in bad), ", ".join(str(r) for r in racks)))
        want = set(want)
        canary_hosts = [n for n in names if rack_of[n] in want]
    out = [{"name": "canary", "hosts": canary_hosts}]
    in_canary = set(canary_hosts)
    rest = [n for n in names if n not in in_canary]
    done = len(canary_hosts)
    total = len(names)
    specs = list(waves or ["100%"])
    for i, w in enumerate(specs):
        kind, v = _fraction(w, "rollout_waves[%d]" % i)
        target = int(math.ceil(v * total)) if kind == "fraction" else done + v
        if i == len(specs) - 1:
            target = total
        target = min(total, max(target, done + 1 if rest else done))
        take = target - done
        if take <= 0:
            continue
        batch, rest = rest[:take], rest[take:]
        label = str(w).strip().replace("%", "pct") if kind == "fraction" else "n%d" % v
        out.append({"name": "fleet-%s" % label, "hosts": batch})
        done += len(batch)
    if rest:
        out.append({"name": "fleet-rest", "hosts": rest})
    seen = set()
    for w in out:
        if w["name"] in seen:
            w["name"] = "%s-%d" % (w["name"], len(seen))
        seen.add(w["name"])
        w["racks"] = sorted({rack_of[h] for h in w["hosts"]}, key=rack_pos.__getitem__)
        w["size"] = len(w["hosts"])
    skipped = []
    deferred = []
    if end_wave:
        wnames = [w["name"] for w in out]
        if end_wave not in wnames:
            raise WaveError("rollout_end_wave=%r: no such wave; waves of this rollout: %s"
                            % (end_wave, ", ".join(wnames)))
        idx = wnames.index(end_wave)
        out, deferred = out[:idx + 1], out[idx + 1:]
    if start_wave == "fleet":
        if len(out) < 2 and not deferred:
            raise WaveError("rollout_start_wave=fleet: this rollout has no fleet wave (every host is in the canary)")
        start_wave = out[1]["name"] if len(out) > 1 else None
    if start_wave:
        wnames = [w["name"] for w in out]
        if start_wave not in wnames:
            raise WaveError("rollout_start_wave=%r: no such wave; waves of this rollout: %s"
                            % (start_wave, ", ".join(wnames)))
        idx = wnames.index(start_wave)
        skipped, out = out[:idx], out[idx:]
    return {
        "waves": out,
        "order": [h for w in out for h in w["hosts"]],
        "serial": [w["size"] for w in out],
        "skipped": skipped,
        "deferred": deferred,
        "wave_of": dict((h, w["name"]) for w in out for h in w["hosts"]),
    }


def racks_to_restore(waves, failed_wave, passed_waves):
    """Racks whose ToR config goes back to the pre-change copy when ``failed_wave`` fails: racks of
    the failed wave or of waves not yet run, unless a host of a passed wave lives there (it needs the
    new policy)."""
    keep = set()
    for w in waves:
        if w["name"] in passed_waves:
            keep.update(w["racks"])
    started = False
    out = []
    for w in waves:
        if w["name"] == failed_wave:
            started = True
        if started:
            for r in w["racks"]:
                if r not in keep and r not in out:
                    out.append(r)
    return out
