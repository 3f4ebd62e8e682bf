# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure statistics of the headline benchmark: percentiles, per-NIC shares, summaries, targets."""

from __future__ import annotations

import math

from ansible_collections.netscale.multinic.plugins.module_utils.fairness import jain


def percentile(values, q):
    """Linear-interpolated percentile (q in 0..100) of a non-empty sequence, as numpy's default."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("percentile of an empty sample")
    if not 0 <= q <= 100:
        raise ValueError("percentile q=%r is outside 0..100" % (q,))
    pos = (len(vals) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def median(values):
    return percentile(values, 50)


def shares(counts):
    """{nic: bytes} -> {nic: fraction of the total} (all 0.0 when nothing moved)."""
    total = float(sum(counts.values()))
    return {k: (round(v / total, 4) if total else 0.0) for k, v in counts.items()}


def gbit(nbytes, seconds):
    return nbytes * 8 / seconds / 1e9 if seconds > 0 else 0.0


def cdf(values):
    """[(value, fraction <= value)] for plotting, sorted."""
    vals = sorted(float(v) for v in values)
    n = len(vals)
    return [(v, (i + 1) / float(n)) for i, v in enumerate(vals)]


def counter_delta(before, after):
    """{nic: {rx, tx}} deltas of two counter snapshots (32-bit wrap not expected: 64-bit counters)."""
    return {nic: {k: after[nic][k] - before[nic][k] for k in ("rx", "tx")} for nic in before}


def summarize_transfers(runs):
    """Group transfer runs by (host, scenario, direction, flows) and compare modes.

    A run: {host, nics, scenario, direction, flows, mode, bytes, seconds, nic_bytes{nic: n}}.
    Returns a list of rows with per-mode medians (seconds, Gbit/s), mean per-NIC shares, Jain's
    index of the mean shares, and speedup = median seconds before / median seconds after.
    """
    groups = {}
    for r in runs:
        key = (r["host"], r["scenario"], r["direction"], r["flows"])
        groups.setdefault(key, {}).setdefault(r["mode"], []).append(r)
    rows = []
    for (host, scenario, direction, flows), modes in sorted(groups.items(), key=lambda kv: _sort_key(kv[0])):
        row = {"host": host, "scenario": scenario, "direction": direction, "flows": flows,
               "nics": next(iter(modes.values()))[0]["nics"]}
        for mode, rs in modes.items():
            secs = [r["seconds"] for r in rs]
            nics = sorted(rs[0]["nic_bytes"])
            mean_shares = {n: round(sum(shares(r["nic_bytes"])[n] for r in rs) / len(rs), 4) for n in nics}
            row[mode] = {
                "runs": len(rs),
                "seconds": round(median(secs), 3),
                "seconds_all": [round(s, 3) for s in secs],
                "gbit_per_s": round(median([gbit(r["bytes"], r["seconds"]) for r in rs]), 4),
                "nic_shares": mean_shares,
                "jain_index": jain(mean_shares.values()),
                "idle_nics": round(sum(sum(1 for v in shares(r["nic_bytes"]).values() if v < 0.02) for r in rs)
                                   / float(len(rs)), 2),
            }
        if "before" in row and "after" in row and row["after"]["seconds"] > 0:
            row["speedup"] = round(row["before"]["seconds"] / row["after"]["seconds"], 2)
        for mode in EXTRA_MODES:
            if "before" in row and mode in row and row[mode]["seconds"] > 0:
                row["speedup_" + mode] = round(row["before"]["seconds"] / row[mode]["seconds"], 2)
        rows.append(row)
    return rows


# "after" variants beside the rollout's default (hash): the same deployment with the egress policy
# least_loaded, and with the workload's sockets MPTCP (the host deployed in MPTCP mode).
EXTRA_MODES = ("least_loaded", "mptcp")
MODES = ("before", "after") + EXTRA_MODES


def _sort_key(key):
    host, scenario, direction, flows = key
    return (host, scenario, direction, -int(flows))


def summarize_reads(samples_by):
    """{(label, mode): [seconds...]} -> {label: {mode: {n, p50, p90, p99, max}, p99/p50 ratios}}."""
    out = {}
    for (host, mode), vals in sorted(samples_by.items()):
        if not vals:
            out.setdefault(host, {})[mode] = {"n": 0}
            continue
        out.setdefault(host, {})[mode] = {
            "n": len(vals),
            "p50": round(percentile(vals, 50), 4),
            "p90": round(percentile(vals, 90), 4),
            "p99": round(percentile(vals, 99), 4),
            "max": round(max(vals), 4),
        }
    for host, modes in out.items():
        b, a = modes.get("before", {}), modes.get("after", {})
        if b.get("n") and a.get("n"):
            modes["p99_after_over_before"] = round(a["p99"] / b["p99"], 4) if b["p99"] else None
            modes["p50_after_over_before"] = round(a["p50"] / b["p50"], 4) if b["p50"] else None
        for mode in EXTRA_MODES:
            x = modes.get(mode, {})
            if b.get("n") and x.get("n"):
                modes["p99_%s_over_before" % mode] = round(x["p99"] / b["p99"], 4) if b["p99"] else None
    return out


def targets(transfer_rows, read_summary, flows_main, read_nics=None):
    """The issue's acceptance targets, each with value, threshold and verdict.

    read_nics: {read label: NIC count}; job-read targets apply to 4-NIC hosts."""
    out = []
    for row in transfer_rows:
        if row["scenario"] != "checkpoint" or row["flows"] != flows_main or "speedup" not in row:
            continue
        n = row["nics"]
        need = {4: 3.8, 2: 1.9}.get(n, round(0.95 * n, 2))
        out.append({"name": "checkpoint %s speedup on %s (%d NICs)" % (
            "save" if row["direction"] == "egress" else "load", row["host"], n),
            "value": row["speedup"], "target": ">= %s" % need, "pass": row["speedup"] >= need})
    for label, modes in read_summary.items():
        ratio = modes.get("p99_after_over_before")
        if ratio is None:
            continue
        nics = (read_nics or {}).get(label)
        if nics != 4:
            continue
        out.append({"name": "job read p99 after/before, %s (%d NICs)" % (label, nics),
                    "value": ratio, "target": "<= 0.25", "pass": ratio <= 0.25})
    for label, modes in read_summary.items():
        if (read_nics or {}).get(label) != 4:
            continue
        for mode in EXTRA_MODES:
            ratio = modes.get("p99_%s_over_before" % mode)
            if ratio is not None:
                out.append({"name": "job read p99 %s/before, %s (4 NICs)" % (mode, label),
                            "value": ratio, "target": "<= 0.25", "pass": ratio <= 0.25})
    return out
