# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Minimal SVG charts (no plotting package needed): grouped bars, stacked share bars, CDF lines."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

PALETTE = ["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb", "#000000"]
FONT = 'font-family="sans-serif" font-size="12"'


def _doc(width, height, body, title):
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">\n'
            '<rect width="100%%" height="100%%" fill="white"/>\n'
            '<text x="%d" y="20" text-anchor="middle" %s font-weight="bold">%s</text>\n%s\n</svg>\n'
            % (width, height, width, height, width // 2, FONT, escape(title), "\n".join(body)))


def _nice_max(v):
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= v:
            return m * exp
    return 10 * exp


def _text(x, y, s, anchor="middle", extra=""):
    font = 'font-family="sans-serif"' if "font-size" in extra else FONT
    return '<text x="%.1f" y="%.1f" text-anchor="%s" %s %s>%s</text>' % (x, y, anchor, font, extra, escape(str(s)))


def grouped_bars(categories, series, title, ylabel, fmt="%.2f"):
    """categories: [label]; series: [(name, [value per category or None])]."""
    width = max(480, 90 * len(categories) + 120)
    height = 360
    left, right, top, bottom = 70, 20, 50, 90
    plot_w, plot_h = width - left - right, height - top - bottom
    vmax = _nice_max(max([v for _n, vals in series for v in vals if v is not None] or [1.0]))
    body = []
    for i in range(5):
        val = vmax * i / 4.0
        y = top + plot_h - plot_h * i / 4.0
        body.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>' % (left, y, width - right, y))
        body.append(_text(left - 6, y + 4, fmt % val, "end"))
    body.append(_text(16, top + plot_h / 2, ylabel, "middle", 'transform="rotate(-90 16 %.1f)"' % (top + plot_h / 2)))
    slot = plot_w / float(max(1, len(categories)))
    bar_w = slot * 0.8 / max(1, len(series))
    for ci, cat in enumerate(categories):
        x0 = left + slot * ci + slot * 0.1
        for si, (_name, vals) in enumerate(series):
            v = vals[ci]
            if v is None:
                continue
            h = plot_h * v / vmax
            x = x0 + bar_w * si
            body.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>'
                        % (x, top + plot_h - h, bar_w - 2, h, PALETTE[si % len(PALETTE)]))
            body.append(_text(x + bar_w / 2 - 1, top + plot_h - h - 3, fmt % v, "middle", 'font-size="10"'))
        lines = str(cat).split("\n")
        for li, line in enumerate(lines):
            body.append(_text(left + slot * ci + slot / 2, top + plot_h + 16 + 14 * li, line))
    for si, (name, _vals) in enumerate(series):
        x = left + 10 + 110 * si
        body.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (x, height - 22, PALETTE[si % len(PALETTE)]))
        body.append(_text(x + 16, height - 12, name, "start"))
    return _doc(width, height, body, title)


def share_bars(rows, title):
    """rows: [(label, {nic: share})]; one horizontal 100% stacked bar per row, NICs coloured."""
    nics = sorted({n for _label, sh in rows for n in sh})
    row_h, left, top = 24, 230, 40
    width, height = 760, top + row_h * len(rows) + 60
    plot_w = width - left - 20
    body = []
    for i in range(5):
        x = left + plot_w * i / 4.0
        body.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dddddd"/>' % (x, top, x, top + row_h * len(rows)))
        body.append(_text(x, top + row_h * len(rows) + 14, "%d%%" % (25 * i)))
    for ri, (label, sh) in enumerate(rows):
        y = top + row_h * ri
        body.append(_text(left - 6, y + row_h * 0.65, label, "end"))
        x = float(left)
        for ni, nic in enumerate(nics):
            w = plot_w * sh.get(nic, 0.0)
            if w <= 0:
                continue
            body.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>'
                        % (x, y + 3, w, row_h - 6, PALETTE[ni % len(PALETTE)]))
            if w > 34:
                body.append(_text(x + w / 2, y + row_h * 0.65, "%.0f%%" % (100 * sh[nic]), "middle",
                                  'fill="white" font-size="10"'))
            x += w
    for ni, nic in enumerate(nics):
        x = left + 80 * ni
        body.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (x, height - 24, PALETTE[ni % len(PALETTE)]))
        body.append(_text(x + 16, height - 14, nic, "start"))
    return _doc(width, height, body, title)


def cdf_lines(series, title, xlabel, log_x=True):
    """series: [(name, [(x, frac)])]; a step line per series, x on a log scale by default."""
    width, height = 640, 400
    left, right, top, bottom = 60, 20, 40, 70
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for _n, pts in series for x, _f in pts if x > 0]
    if not xs:
        xs = [1.0]
    if log_x:
        lo = 10 ** math.floor(math.log10(min(xs)))
        hi = 10 ** math.ceil(math.log10(max(xs)))
        if hi <= lo:
            hi = lo * 10

        def fx(v):
            return left + plot_w * (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        ticks = []
        t = lo
        while t <= hi * 1.0001:
            ticks.append(t)
            t *= 10
    else:
        lo, hi = 0.0, _nice_max(max(xs))

        def fx(v):
            return left + plot_w * (v - lo) / (hi - lo)
        ticks = [hi * i / 4.0 for i in range(5)]

    def fy(f):
        return top + plot_h - plot_h * f

    body = []
    for t in ticks:
        body.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dddddd"/>' % (fx(t), top, fx(t), top + plot_h))
        body.append(_text(fx(t), top + plot_h + 16, ("%g" % t)))
    for i in range(5):
        f = i / 4.0
        body.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>' % (left, fy(f), left + plot_w, fy(f)))
        body.append(_text(left - 6, fy(f) + 4, "%.2f" % f, "end"))
    body.append(_text(left + plot_w / 2, height - 34, xlabel))
    for si, (name, pts) in enumerate(series):
        if not pts:
            continue
        d = ["M %.1f %.1f" % (fx(pts[0][0]), fy(0.0))]
        prev = 0.0
        for x, f in pts:
            d.append("L %.1f %.1f L %.1f %.1f" % (fx(x), fy(prev), fx(x), fy(f)))
            prev = f
        body.append('<path d="%s" fill="none" stroke="%s" stroke-width="2"/>' % (" ".join(d), PALETTE[si % len(PALETTE)]))
        x = left + 10 + 200 * si
        body.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (x, height - 20, PALETTE[si % len(PALETTE)]))
        body.append(_text(x + 16, height - 10, name, "start"))
    return _doc(width, height, body, title)
