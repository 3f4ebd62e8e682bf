# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host has now: links, addresses, routes, rules and proxy entries, read with ``ip -j``
and cached until :meth:`LiveView.forget` (one plan reads each object once)."""

from __future__ import annotations

from ansible_collections.netscale.multinic.plugins.module_utils.datapath import run as datapath_run


class LiveView(object):
    """Cached reads of the host's (or a namespace's) network state through a ``run.Runner``.
    A namespace that does not exist reads as empty."""

    def __init__(self, runner):
        self.runner = runner
        self._cache = {}

    def forget(self):
        self._cache = {}

    def _cached(self, key, read):
        if key not in self._cache:
            self._cache[key] = read()
        return self._cache[key]

    def _missing(self, netns):
        return bool(netns) and not datapath_run.netns_exists(netns)

    def links(self, netns=None):
        """{ifname: link} of the host or ``netns``."""
        def read():
            if self._missing(netns):
                return {}
            return dict((link["ifname"], link) for link in self.runner.ip_json(["link", "show"], netns))
        return self._cached(("links", netns), read)

    def addresses(self, netns=None):
        """{(ifname, "address/prefixlen")}."""
        def read():
            out = set()
            if not self._missing(netns):
                for link in self.runner.ip_json(["addr", "show"], netns):
                    for a in link.get("addr_info", []):
                        out.add((link["ifname"], "%s/%s" % (a["local"], a["prefixlen"])))
            return out
        return self._cached(("addrs", netns), read)

    def routes(self, family, table, netns=None):
        """Normalised routes (``run.norm_route``) of one table."""
        def read():
            if self._missing(netns):
                return []
            return [datapath_run.norm_route(r, family)
                    for r in self.runner.ip_json(["-%d" % family, "route", "show", "table", str(table)], netns)]
        return self._cached(("routes", family, table, netns), read)

    def rules(self, family):
        """{(priority, iif, table, suppress_prefixlen)} of the host."""
        def read():
            return set((r.get("priority"), r.get("iif"), str(r.get("table")), r.get("suppress_prefixlen"))
                       for r in self.runner.ip_json(["-%d" % family, "rule", "show"]))
        return self._cached(("rules", family), read)

    def proxies(self):
        """{(dev, address)} of the host's proxy ND/ARP entries."""
        def read():
            out = set()
            for fam in (4, 6):
                for n in self.runner.ip_json(["-%d" % fam, "neigh", "show", "proxy"]):
                    out.add((n.get("dev"), n.get("dst")))
            return out
        return self._cached(("proxy",), read)

    def route_present(self, route, netns=None):
        """Whether ``route`` (see datapath.desired) is installed exactly: nexthops and source."""
        f, table, dst, nhs, src, metric = route
        want_metric = metric if metric is not None else (0 if f == 4 else 1024)
        want_nhs = sorted(nhs, key=lambda x: (x[1] or "", x[0] or ""))
        for r in self.routes(f, table, netns):
            if r["dst"] == dst and r["metric"] == want_metric and r["type"] == "unicast":
                return r["nexthops"] == want_nhs and (src is None or r["src"] == src)
        return False

    def route_listed(self, route, netns=None):
        """Whether the host (or ``netns``) has a route to ``route``'s destination with its metric (removal)."""
        f, table, dst, dummy, dummy, metric = route
        want_metric = metric if metric is not None else (0 if f == 4 else 1024)
        return any(r["dst"] == dst and r["metric"] == want_metric for r in self.routes(f, table, netns))
