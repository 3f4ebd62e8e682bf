"""Synthetic detections from injected faults: the probe model of issue 29 over a FabricIndex.

Each host probes from each NIC n (pinned) the NIC n (or its last NIC) of: every other host of its
rack, and one host of every other rack of its zone (rotating with the interval). A path crosses the
source's NIC/ToR port, its ToR, and, leaving the rack, one spine chosen by a hash of the path (ECMP),
then the target's ToR and NIC. Per interval a path whose loss is above zero yields a ``path_loss``
detection (value: lost/sent of ``probes`` probes, sampled). Faults also yield their passive signals
(watcher, BFD, BGP, carrier, tor_down, uplink_loss, agent_down) the way the agent and the exporters
would. Only paths that touch a faulty element are enumerated, so a 125K-host region stays cheap.

Used by bench/correlate_scale.py and tests/unit/monitor (ground truth: ``Fault.expect``).
"""
import random
import zlib

from ansible_collections.netscale.multinic.plugins.module_utils.monitor.detections import Detection


class Fault(object):
    """kind: nic, host, tor, uplink, agent, flap. ``expect`` is the scope key a correct case has."""

    def __init__(self, kind, start, end, host=None, nic=None, tor=None, spine=None, loss=1.0, flaps=(),
                 exporter=True):
        self.kind, self.start, self.end = kind, start, end
        self.host, self.nic, self.tor, self.spine, self.loss = host, nic, tor, spine, loss
        self.flaps = tuple(flaps)
        self.exporter = exporter  # uplink: the ToR/spine exporter reports uplink_loss

    @property
    def expect(self):
        if self.kind in ("nic", "flap"):
            return ("nic", self.host, self.nic)
        if self.kind == "host":
            return ("host", self.host)
        if self.kind == "tor":
            return ("tor", self.tor)
        if self.kind == "uplink":
            return ("uplink", self.tor, self.spine if self.exporter else "*")
        return ("agent", self.host)


def _h(*parts):
    return zlib.crc32(("|".join(str(p) for p in parts)).encode())


class Simulator(object):
    def __init__(self, index, interval=10.0, probes=100, seed=1):
        self.idx = index
        self.interval = interval
        self.probes = probes
        self.rnd = random.Random(seed)

    # -- the probe model ----------------------------------------------------------------------
    def _target_nic(self, target, n):
        return min(n, self.idx.nic_count(target))

    def _pick(self, r, source, k):
        """The host of rack r that ``source`` probes in interval k (rotating)."""
        hosts = self.idx.rack_hosts(r)
        return hosts[(k + _h(source)) % len(hosts)]

    def paths_of(self, host, k):
        """Paths (src, nic, target, target_nic) from ``host`` in interval k."""
        idx = self.idx
        r = idx.rack_of_host(host)
        out = []
        targets = [h for h in idx.rack_hosts(r) if h != host]
        targets += [self._pick(q, host, k) for q in idx.zone_racks(idx.zone_of_rack(r)) if q != r]
        for n in range(1, idx.nic_count(host) + 1):
            out.extend((host, n, t, self._target_nic(t, n)) for t in targets)
        return out

    def paths_into(self, host, k):
        """Paths toward ``host`` in interval k."""
        idx = self.idx
        r = idx.rack_of_host(host)
        out = []
        for q in idx.zone_racks(idx.zone_of_rack(r)):
            for src in idx.rack_hosts(q):
                if src == host or (q != r and self._pick(r, src, k) != host):
                    continue
                for n in range(1, idx.nic_count(src) + 1):
                    tn = self._target_nic(host, n)
                    out.append((src, n, host, tn))
        return out

    def spine_of(self, path):
        idx = self.idx
        spines = idx.zone_spines(idx.zone_of_rack(idx.rack_of_host(path[0])))
        return spines[_h(*path) % len(spines)] if spines else None

    # -- detections ---------------------------------------------------------------------------
    def _loss(self, loss):
        if loss >= 1.0:
            return 1.0
        # Binomial(probes, loss) by its normal approximation: one draw per path, not one per probe.
        mu = self.probes * loss
        lost = int(round(self.rnd.gauss(mu, (mu * (1.0 - loss)) ** 0.5)))
        return min(max(lost, 0), self.probes) / float(self.probes)

    def _t(self, k):
        return (k + 1) * self.interval - self.rnd.random() * self.interval * 0.5

    def fault_detections(self, fault, k):
        """Detections of ``fault`` in interval k (list)."""
        idx, out = self.idx, []
        t0 = k * self.interval
        if not (fault.start <= t0 < fault.end):
            return out
        first = t0 < fault.start + self.interval
        kind = fault.kind
        lossy = {}
        down = set()
        if kind == "agent":
            down.add(fault.host)
            out.append(Detection(self._t(k), "agent_down", host=fault.host, source="agent"))
            for p in self.paths_into(fault.host, k):
                lossy[p] = 1.0
        elif kind in ("nic", "host", "flap"):
            nics = range(1, idx.nic_count(fault.host) + 1) if kind == "host" else (fault.nic,)
            active = True
            if kind == "flap":
                active = any(f <= t0 < f + self.interval for f in fault.flaps)
                if active:
                    for name in ("carrier_change", "nic_out", "bfd_down", "bgp_down"):
                        out.append(Detection(self._t(k), name, host=fault.host, nic=fault.nic,
                                             source={"carrier_change": "counters", "nic_out": "watcher"}.get(name, name[:3])))
            if active:
                for p in self.paths_of(fault.host, k) + self.paths_into(fault.host, k):
                    side = p[1] if p[0] == fault.host else p[3]
                    if side in nics:
                        lossy[p] = fault.loss
        elif kind == "tor":
            r = idx.rack_of_tor(fault.tor)
            out.append(Detection(self._t(k), "tor_down", tor=fault.tor, source="frr_exporter"))
            for s in idx.zone_spines(idx.zone_of_rack(r)):
                out.append(Detection(self._t(k), "uplink_loss", tor=fault.tor, spine=s, source="frr_exporter"))
            for h in idx.rack_hosts(r):
                if first:
                    for n in range(1, idx.nic_count(h) + 1):
                        for name, src in (("nic_out", "watcher"), ("bfd_down", "bfd"), ("bgp_down", "bgp")):
                            out.append(Detection(self._t(k), name, host=h, nic=n, source=src))
                for p in self.paths_of(h, k) + self.paths_into(h, k):
                    lossy[p] = 1.0
        elif kind == "uplink":
            r = idx.rack_of_tor(fault.tor)
            if fault.exporter:
                out.append(Detection(self._t(k), "uplink_loss", tor=fault.tor, spine=fault.spine,
                                     value=round(fault.loss, 4), source="frr_exporter"))
            for h in idx.rack_hosts(r):
                for p in self.paths_of(h, k) + self.paths_into(h, k):
                    if idx.rack_of_host(p[0]) != idx.rack_of_host(p[2]) and self.spine_of(p) == fault.spine:
                        lossy[p] = fault.loss
        for p, loss in lossy.items():
            if p[0] in down:
                continue
            v = self._loss(loss)
            if v > 0:
                out.append(Detection(self._t(k), "path_loss", host=p[0], nic=p[1], target=p[2], target_nic=p[3],
                                     value=v, source="probe"))
        return out

    def noise(self, k, count, above=0):
        """``count`` sub-threshold path_loss detections (value 0.001..0.009) and ``above`` isolated
        blips at 1-3 %% between random pairs, in interval k."""
        idx, out = self.idx, []
        hosts = self._hosts()
        for i in range(count + above):
            h = hosts[self.rnd.randrange(len(hosts))]
            r = idx.rack_of_host(h)
            racks = idx.zone_racks(idx.zone_of_rack(r))
            q = racks[self.rnd.randrange(len(racks))]
            t = self._pick(q, h, k) if q != r else self.rnd.choice(idx.rack_hosts(r))
            if t == h:
                continue
            n = self.rnd.randint(1, idx.nic_count(h))
            v = round(self.rnd.uniform(0.001, 0.009), 4) if i < count else round(self.rnd.uniform(0.01, 0.03), 4)
            out.append(Detection(self._t(k), "path_loss", host=h, nic=n, target=t, target_nic=self._target_nic(t, n),
                                 value=v, source="probe"))
        return out

    def _hosts(self):
        if not hasattr(self, "_host_list"):
            self._host_list = sorted(self.idx.hosts)
        return self._host_list

    def stream(self, faults, t_end, noise=0, above=0, t_start=0.0):
        """Every detection from ``t_start`` to ``t_end``, interval by interval (unsorted inside one)."""
        k = int(t_start // self.interval)
        while k * self.interval < t_end:
            for fault in faults:
                yield from self.fault_detections(fault, k)
            if noise or above:
                yield from self.noise(k, noise, above)
            k += 1
