# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Headline report: results.json -> summary (rows, read percentiles, targets), SVG plots, Markdown.

Pure: ``build(results)`` returns {file name: text}; nothing here touches the lab.
"""

from __future__ import annotations

import json

from ansible_collections.netscale.multinic.bench.headline import stats, svg

META_PUBLISHED = [
    ("job read latency under a checkpoint surge", "300 s before, 1-8 s after (8 s baseline)"),
    ("checkpoint loading", "800 s -> 100 s (8x)"),
    ("4-NIC host, per-NIC share", "~25% each, 4x throughput"),
]


def read_label(entry):
    return "%s %s surge" % (entry["host"], entry.get("surge", "greedy"))


def _reads_by(results):
    by = {}
    for r in results["reads"]:
        by.setdefault((read_label(r), r["mode"]), []).extend(r["samples"])
    return by


def summarize(results):
    rows = stats.summarize_transfers(results["transfers"])
    reads = stats.summarize_reads(_reads_by(results))
    nics = {}
    for r in results["reads"]:
        nics[read_label(r)] = r["nics"]
        reads.setdefault(read_label(r), {}).setdefault("surge", {}).setdefault(r["mode"], []).append(
            {"gbit_per_s": r["surge_gbit_per_s"], "offered_gbit_per_s": r.get("surge_offered_gbit_per_s"),
             "nic_shares_rx": r["nic_shares_rx"]})
    return {"transfers": rows, "reads": reads,
            "targets": stats.targets(rows, reads, results["params"]["flows"], nics)}


def _modes(rows):
    """The modes present in rows, in the order of stats.MODES."""
    return [m for m in stats.MODES if any(m in r for r in rows)]


def _label(row):
    what = {"egress": "save", "ingress": "load"}[row["direction"]]
    return "%s\n%s %d fl" % (row["host"], what, row["flows"])


def plots(results, summary):
    rows = summary["transfers"]
    out = {}
    main = [r for r in rows if r["scenario"] == "checkpoint"]
    out["throughput.svg"] = svg.grouped_bars(
        [_label(r) for r in main],
        [(m, [r.get(m, {}).get("gbit_per_s") for r in main]) for m in _modes(main)],
        "Checkpoint save/load throughput, before (NIC 0 only) and after the rollout", "Gbit/s", "%.2f")
    few = [r for r in rows if r["scenario"] in ("few_flows", "checkpoint")
           and any(x["scenario"] == "few_flows" and x["host"] == r["host"] for x in rows)]
    if few:
        out["few_flows.svg"] = svg.grouped_bars(
            [_label(r) for r in few],
            [(m, [r.get(m, {}).get("gbit_per_s") for r in few]) for m in _modes(few)],
            "Throughput by number of flows (after = hash ECMP; least_loaded; MPTCP)", "Gbit/s", "%.2f")
    share_rows = []
    for r in rows:
        for m in stats.MODES:
            if m in r:
                share_rows.append(("%s %s %s %dfl" % (r["host"], {"egress": "save", "ingress": "load"}[r["direction"]],
                                                      m, r["flows"]), r[m]["nic_shares"]))
    for label, d in summary["reads"].items():
        for m, entries in sorted(d.get("surge", {}).items()):
            sh = {}
            for e in entries:
                for k, v in e["nic_shares_rx"].items():
                    sh[k] = sh.get(k, 0.0) + v / len(entries)
            share_rows.append(("%s rx %s" % (label.replace(" surge", ""), m), sh))
    out["nic_shares.svg"] = svg.share_bars(share_rows, "Per-NIC byte share (host NIC counters)")
    series = []
    for (label, mode), vals in sorted(_reads_by(results).items()):
        if vals:
            series.append(("%s, %s" % (label, mode), stats.cdf(vals)))
    if series:
        out["latency_cdf.svg"] = svg.cdf_lines(series, "Job read completion time under a checkpoint surge (CDF)",
                                               "seconds (log scale)")
    return out


def markdown(results, summary):
    p = results["params"]
    m = results["machine"]
    lines = ["# Headline benchmark %s" % results["id"], "",
             "Fabric `%s`, NIC rate %s (tbf, both directions), %s, checkpoint %d MB over %d flows, "
             "few flows %s (%d MB), job reads %.1f MB x %d readers for %ss under a %d-flow surge; %d repetition(s), "
             "before/after alternated." % (results["fabric"], p["rate"], p["family"], p["size"] // 10 ** 6,
                                           p["flows"], p["few_flows"], p["few_size"] // 10 ** 6, p["read_bytes"] / 1e6,
                                           p["readers"], p["read_window"], p["surge_flows"], p["reps"]),
             "", "Machine: %s, %d CPUs, kernel %s; load average at start %s, at end %s." % (
                 m.get("cpu_model", "?"), m.get("cpus", 0), m.get("kernel", "?"), m.get("loadavg_start"),
                 m.get("loadavg_end")),
             "", "Host datapath mode: %s." % (", ".join("%s %s" % kv for kv in sorted(results.get("datapath", {}).items()))
                                              or "not recorded"), "",
             "| host | NICs | transfer | flows | before s | after s | before Gbit/s | after Gbit/s | speedup | after shares |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary["transfers"]:
        b, a = r.get("before", {}), r.get("after", {})
        lines.append("| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s |" % (
            r["host"], r["nics"], "save (egress)" if r["direction"] == "egress" else "load (ingress)", r["flows"],
            b.get("seconds", "-"), a.get("seconds", "-"), b.get("gbit_per_s", "-"), a.get("gbit_per_s", "-"),
            "%.2fx" % r["speedup"] if "speedup" in r else "-",
            " / ".join("%.0f%%" % (100 * v) for v in a.get("nic_shares", {}).values())))
    extra = [m for m in _modes(summary["transfers"]) if m in stats.EXTRA_MODES]
    if extra:
        head = " | ".join("%s Gbit/s | %s × before | %s shares" % (m, m, m) for m in extra)
        lines += ["", "Other egress placements beside the rollout's default (after = hash ECMP): "
                  + ", ".join(extra) + ".", "",
                  "| host | transfer | flows | " + head + " |",
                  "|---|---|---|" + "---|---|---|" * len(extra)]
        for r in summary["transfers"]:
            cells = []
            for m in extra:
                x = r.get(m, {})
                cells += [str(x.get("gbit_per_s", "-")),
                          "%.2fx" % r["speedup_" + m] if "speedup_" + m in r else "-",
                          " / ".join("%.0f%%" % (100 * v) for v in x.get("nic_shares", {}).values()) or "-"]
            lines.append("| %s | %s | %d | %s |" % (
                r["host"], "save (egress)" if r["direction"] == "egress" else "load (ingress)", r["flows"],
                " | ".join(cells)))
    lines += ["", "| job reads under | mode | reads | p50 s | p90 s | p99 s | max s | surge got Gbit/s |",
              "|---|---|---|---|---|---|---|---|"]
    for label, d in summary["reads"].items():
        for mode in stats.MODES:
            s = d.get(mode)
            got = [e["gbit_per_s"] for e in d.get("surge", {}).get(mode, [])]
            if s and s.get("n"):
                lines.append("| %s | %s | %d | %s | %s | %s | %s | %s |" % (
                    label, mode, s["n"], s["p50"], s["p90"], s["p99"], s["max"],
                    round(sum(got) / len(got), 3) if got else "-"))
    lines += ["", "| target | value | want | verdict |", "|---|---|---|---|"]
    for t in summary["targets"]:
        lines.append("| %s | %s | %s | %s |" % (t["name"], t["value"], t["target"], "met" if t["pass"] else "NOT met"))
    lines += ["", "Meta's published figures (for comparison): "] + ["- %s: %s" % kv for kv in META_PUBLISHED]
    lines += ["", "Plots: throughput.svg, few_flows.svg, nic_shares.svg, latency_cdf.svg. Raw data: results.json."]
    return "\n".join(lines) + "\n"


def build(results):
    summary = summarize(results)
    files = plots(results, summary)
    full = dict(results, summary=summary)
    files["results.json"] = json.dumps(full, indent=1, sort_keys=True) + "\n"
    files["summary.md"] = markdown(results, summary)
    return files, summary
