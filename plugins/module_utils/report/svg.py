# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small hand-written SVG bar chart: per-NIC byte share per host and direction, with the ideal
1/N line and the tolerance band. No plotting library needed."""

from __future__ import annotations

from xml.sax.saxutils import escape

COLORS = {"up": "#3b7dd8", "down": "#e08a2b"}


def shares_svg(rows, tolerance=None, title="Per-NIC byte share per host (probe)"):
    """``rows``: list of ``{"host", "direction", "shares": {nic: share}, "verdict"}``.
    Returns the SVG document as text."""
    bar_w, gap, group_gap = 18, 3, 28
    left, top, height = 60, 50, 220
    x = left
    groups = []
    for r in rows:
        nics = sorted(r.get("shares") or {})
        w = max(1, len(nics)) * (bar_w + gap)
        groups.append((x, w, r, nics))
        x += w + group_gap
    width = max(x + 20, 360)
    total_h = top + height + 90

    def y_of(v):
        return top + height - v * height

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="11">' % (width, total_h, width, total_h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>' % (left, escape(title))]
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, width - 10, y_of(t), y_of(t)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%d%%</text>' % (left - 6, y_of(t) + 4, int(t * 100)))
    for gx, gw, r, nics in groups:
        n = max(1, len(nics))
        ideal = 1.0 / n
        if tolerance is not None:
            lo, hi = max(0.0, ideal - tolerance), min(1.0, ideal + tolerance)
            out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="#2a2" fill-opacity="0.12"/>'
                       % (gx - 2, y_of(hi), gw + 2, y_of(lo) - y_of(hi)))
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2a2" stroke-dasharray="4,2"/>'
                   % (gx - 2, gx + gw, y_of(ideal), y_of(ideal)))
        color = COLORS.get(r.get("direction"), "#777")
        for i, nic in enumerate(nics):
            v = float(r["shares"][nic])
            bx = gx + i * (bar_w + gap)
            out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s %s %s: %.1f%%</title></rect>'
                       % (bx, y_of(v), bar_w, top + height - y_of(v), color, escape(r["host"]),
                          escape(r.get("direction", "")), escape(nic), v * 100))
            out.append('<text x="%d" y="%d" text-anchor="middle" font-size="9">%s</text>'
                       % (bx + bar_w // 2, top + height + 12, escape(nic)))
        mark = {"pass": "#2a2", "fail": "#c22"}.get(r.get("verdict"), "#777")
        out.append('<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>'
                   % (gx + gw // 2, top + height + 28, mark, escape(r["host"])))
        out.append('<text x="%d" y="%d" text-anchor="middle" fill="%s">%s %s</text>'
                   % (gx + gw // 2, top + height + 42, color, escape(r.get("direction", "")),
                      escape(r.get("verdict") or "")))
    ly = top + height + 68
    out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">up (host tx)</text>'
               % (left, ly, COLORS["up"], left + 14, ly + 9))
    out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">down (host rx)</text>'
               % (left + 110, ly, COLORS["down"], left + 124, ly + 9))
    band = "" if tolerance is None else " (band: +/- %.0f points)" % (tolerance * 100)
    out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#2a2" stroke-dasharray="4,2"/>'
               '<text x="%d" y="%d">1/N%s</text>' % (left + 230, left + 250, ly + 5, ly + 5, left + 254, ly + 9, band))
    out.append("</svg>")
    return "\n".join(out) + "\n"
