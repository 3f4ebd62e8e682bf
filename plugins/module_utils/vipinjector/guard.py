# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""VipInjector guard and desired-state logic, pure (no I/O, no Ansible imports).

The sidecar helper (:mod:`.sidecar`, shipped to hosts as ``vipinjector-helper``) runs it; the
controller-side renderer and the unit tests import it directly:

* :class:`Allocation` and :func:`scan_exabgp_config`: the guard. Every command the helper emits is
  checked against the instance's allocation, and the ExaBGP configuration it runs under is scanned
  at start: any static route (another host's task IP above all) puts the helper in *refused* mode;
* :class:`RiseFall` and :class:`HelperCore`: when the task IP is wanted on which session (health,
  drain, per-NIC path), and the ExaBGP commands that get there;
* :func:`prometheus_text`: the status as a Prometheus text-file metric.
"""

from __future__ import annotations

import ipaddress
import re
import time

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError
from ansible_collections.netscale.multinic.plugins.module_utils.writing import redact

__all__ = [
    "GuardError",
    "Allocation",
    "parse_api_command",
    "scan_exabgp_config",
    "RiseFall",
    "HelperCore",
]

STATUS_VERSION = 1


# --------------------------------------------------------------------------------------------
# Guard
# --------------------------------------------------------------------------------------------
class GuardError(MultinicError, ValueError):
    """A command or a configuration would announce something this instance does not own."""


def _net(text):
    return ipaddress.ip_network(text, strict=True)


def _addr(text):
    return ipaddress.ip_address(text)


class Allocation(object):
    """The prefixes an instance may announce and, per session, the next hops it may use.

    ``prefixes``: host routes (/32, /128) — the slot's task IPs.
    ``sessions``: list of dicts ``{"peer": ADDR, "local": ADDR, "next_hop": {"ipv4": A, "ipv6": A}}``.
    """

    def __init__(self, prefixes, sessions):
        self.prefixes = []
        problems = []
        for p in prefixes:
            try:
                net = _net(p)
            except ValueError as exc:
                problems.append("allocation prefix %r is not a valid prefix (%s)" % (p, exc))
                continue
            if net.prefixlen != net.max_prefixlen:
                problems.append(
                    "allocation prefix %s is not a host route: a task IP is announced as /32 or "
                    "/128 only" % net
                )
                continue
            self.prefixes.append(net)
        if not self.prefixes and not problems:
            problems.append("allocation has no task IP prefix")
        self.sessions = {}
        for i, s in enumerate(sessions):
            try:
                peer = _addr(s["peer"])
                local = _addr(s["local"])
                nhs = dict((fam, _addr(a)) for fam, a in (s.get("next_hop") or {}).items() if a)
            except (KeyError, ValueError) as exc:
                problems.append("session %d: invalid peer/local/next_hop (%s)" % (i, exc))
                continue
            if peer in self.sessions:
                problems.append("session %d: peer %s appears twice" % (i, peer))
            self.sessions[peer] = {"local": local, "next_hop": nhs, "nic": s.get("nic", i)}
        if not self.sessions and not problems:
            problems.append("allocation has no BGP session")
        if problems:
            raise GuardError("; ".join(problems))

    # ---
    def owns(self, prefix):
        net = _net(prefix) if not isinstance(prefix, (ipaddress.IPv4Network, ipaddress.IPv6Network)) else prefix
        return net in self.prefixes

    def addresses(self):
        """Every address legitimately named in this instance's ExaBGP configuration."""
        out = set(p.network_address for p in self.prefixes)
        for peer, s in self.sessions.items():
            out.add(peer)
            out.add(s["local"])
            out.update(s["next_hop"].values())
        return out

    def check(self, command, withdrawable=()):
        """Raise GuardError unless ``command`` is an announce/withdraw this instance may send.

        Announce: exactly ``neighbor PEER announce route PREFIX next-hop NH`` where PEER is one of the
        instance's sessions, PREFIX one of its task IPs and NH that session's own address of the
        prefix's family. Withdraw: exactly ``neighbor PEER withdraw route PREFIX`` for one of its task
        IPs, or for a prefix in ``withdrawable`` (the foreign prefixes the configuration guard found:
        the refused mode withdraws what a tampered configuration announced). Anything else, and any
        error while checking, is a refusal (GuardError): the guard fails closed.
        """
        try:
            return self._check(command, withdrawable)
        except GuardError:
            raise
        except Exception as exc:  # pylint: disable=broad-except
            raise GuardError("command %r refused: the guard could not check it (%s: %s)"
                             % (command, type(exc).__name__, exc))

    def _check(self, command, withdrawable):
        parsed = parse_api_command(command)
        if parsed["peer"] is None:
            raise GuardError(
                "command %r has no 'neighbor ADDR' selector: every command must target one of "
                "this instance's sessions" % command
            )
        peer = parsed["peer"]
        if peer not in self.sessions:
            raise GuardError("command %r targets %s, which is not one of this instance's BGP "
                             "peers (%s)" % (command, peer, ", ".join(str(p) for p in self.sessions)))
        prefix = parsed["prefix"]
        if parsed["action"] == "withdraw":
            if parsed["attributes"]:
                raise GuardError("withdraw %r carries attributes %s; a withdraw names the prefix only"
                                 % (command, ", ".join(sorted(parsed["attributes"]))))
            allowed = set(self.prefixes)
            for w in withdrawable or ():
                try:
                    allowed.add(w if isinstance(w, (ipaddress.IPv4Network, ipaddress.IPv6Network)) else _net(w))
                except ValueError:
                    continue
            if prefix not in allowed:
                raise GuardError(
                    "refused to withdraw %s: not this instance's task IP (allowed: %s)"
                    % (prefix, ", ".join(str(p) for p in sorted(allowed, key=str))))
            return parsed
        if prefix not in self.prefixes:
            raise GuardError(
                "refused to announce %s: not this instance's task IP (allowed: %s)"
                % (prefix, ", ".join(str(p) for p in self.prefixes))
            )
        extra = set(parsed["attributes"]) - {"next-hop"}
        if extra:
            raise GuardError("announce %r carries attributes %s; only next-hop is allowed"
                             % (command, ", ".join(sorted(extra))))
        nh = parsed["attributes"].get("next-hop")
        if nh is None:
            raise GuardError("announce %r has no next-hop" % command)
        fam = "ipv4" if prefix.version == 4 else "ipv6"
        own = self.sessions[peer]["next_hop"].get(fam)
        try:
            nh_addr = _addr(nh)
        except ValueError:
            nh_addr = None
        if own is None or nh_addr != own:
            raise GuardError(
                "refused next-hop %s for %s on session %s: the only allowed next hop is this "
                "container's own address on that NIC (%s), never 'self'" % (nh, prefix, peer, own)
            )
        return parsed


_API_ACTIONS = ("announce", "withdraw")


def parse_api_command(command):
    """Parse the one form of the ExaBGP text API the helper speaks, strictly.

    ``neighbor ADDR announce route PREFIX next-hop ADDR`` or ``neighbor ADDR withdraw route PREFIX``
    (the ``neighbor ADDR`` selector may be absent here; :meth:`Allocation.check` refuses that).
    One line of printable ASCII, single spaces, a plain address as selector (no zone, no list, no
    other selector), PREFIX an address or a strict ``ADDR/LEN`` network, attributes as unique
    ``name value`` pairs. Returns ``{"peer": ip_address|None, "action": "announce"|"withdraw",
    "prefix": ip_network, "attributes": {name: value}}``; raises GuardError for anything else (flow
    routes, vpls, ``announce attributes ... nlri``, several commands on one line, ...).
    """
    if not isinstance(command, str):
        raise GuardError("command %r is not text" % (command,))
    if any(not (" " <= ch <= "~") for ch in command) or command != " ".join(command.split()):
        raise GuardError("command %r is not one line of printable ASCII with single spaces: "
                         "the helper sends nothing else" % command)
    if any(ch in command for ch in ";{}[]%,\"'\\"):
        raise GuardError("command %r has a separator, quote, zone or list: the helper sends nothing "
                         "else" % command)
    tokens = command.split(" ")
    peer = None
    if tokens[:1] == ["neighbor"]:
        if len(tokens) < 2:
            raise GuardError("command %r: 'neighbor' without an address" % command)
        try:
            peer = _addr(tokens[1])
        except ValueError:
            raise GuardError("command %r: neighbor selector %r is not an address"
                             % (command, tokens[1]))
        tokens = tokens[2:]
    if len(tokens) < 3 or tokens[0] not in _API_ACTIONS or tokens[1] != "route":
        raise GuardError("command %r is not 'neighbor ADDR announce|withdraw route PREFIX ...': "
                         "the helper sends nothing else" % command)
    text = tokens[2]
    try:
        if "/" in text:
            prefix = _net(text)
        else:
            prefix = ipaddress.ip_network(_addr(text))
    except ValueError:
        raise GuardError("command %r: %r is not a prefix" % (command, text))
    rest = tokens[3:]
    if len(rest) % 2:
        raise GuardError("command %r: attributes must be 'name value' pairs" % command)
    attrs = {}
    for name, value in zip(rest[0::2], rest[1::2]):
        if name in attrs:
            raise GuardError("command %r repeats the attribute %s" % (command, name))
        attrs[name] = value
    return {"peer": peer, "action": tokens[0], "prefix": prefix, "attributes": attrs}


_TOKEN_RE = re.compile(r'"[^"]*"|\'[^\']*\'|[{};\[\]]|[^\s{};\[\]]+')
_ROUTE_KEYWORDS = {"route", "static", "announce", "flow", "l2vpn", "vpls", "attribute", "attributes",
                   "nlri", "unicast", "multicast", "labeled-unicast", "mpls-vpn", "flow-vpn",
                   "operational", "watchdog"}


def _strip_comments(text):
    out = []
    for line in text.splitlines():
        # '#' starts a comment unless inside quotes (md5 keys may contain '#').
        buf, quote = [], None
        for ch in line:
            if quote:
                buf.append(ch)
                if ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
                buf.append(ch)
            elif ch == "#":
                break
            else:
                buf.append(ch)
        out.append("".join(buf))
    return "\n".join(out)


def _tokens_with_lines(text):
    """[(token without quotes, line number)] of a configuration, comments stripped."""
    stripped = _strip_comments(text)
    out = []
    line, pos = 1, 0
    for m in _TOKEN_RE.finditer(stripped):
        line += stripped.count("\n", pos, m.start())
        pos = m.start()
        out.append((m.group(0).strip("\"'"), line))
    return out


def _located(finding, lines, line):
    """Name the offending line in a finding (``line``: its number; the message starts with it)."""
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    finding["line"] = line
    finding["message"] = "line %d (%s): %s" % (line, text, finding["message"])
    return finding


def _helper_run_ok(argv):
    """The one ``run`` the role renders: PYTHON .../vipinjector-helper --config .../helper.json."""
    return (len(argv) == 4 and argv[0].rsplit("/", 1)[-1].startswith("python")
            and argv[1].rsplit("/", 1)[-1] == "vipinjector-helper" and argv[2] == "--config"
            and argv[3].endswith(".json"))


def _structure_findings(toks):
    """One ``process`` whose ``run`` is the helper, named by every ``processes`` list; no include."""
    findings = []
    processes = []
    in_process = set()  # token indexes inside a process block
    i = 0
    while i < len(toks):
        tok, line = toks[i]
        low = tok.lower()
        prev = toks[i - 1][0] if i else ";"
        if low == "process" and prev in (";", "{", "}"):
            name = toks[i + 1][0] if i + 1 < len(toks) else ""
            processes.append(name)
            if len(processes) > 1:
                findings.append({"kind": "extra-process", "value": name, "line": line,
                                 "message": "a second process block %r: the VipInjector configuration "
                                            "runs exactly one process, the helper" % name})
            # the block's run statement
            depth, j, run_seen = 0, i + 2, False
            while j < len(toks):
                t = toks[j][0]
                if t == "{":
                    depth += 1
                elif t == "}":
                    depth -= 1
                    if depth <= 0:
                        break
                elif t.lower() == "run" and toks[j - 1][0] in (";", "{", "}"):
                    run_seen = True
                    argv = []
                    k = j + 1
                    while k < len(toks) and toks[k][0] not in (";", "{", "}"):
                        argv.extend(toks[k][0].split())
                        k += 1
                    if not _helper_run_ok(argv):
                        findings.append({"kind": "process-run", "value": " ".join(argv), "line": toks[j][1],
                                         "message": "process %r runs %r: the only process allowed is the "
                                                    "VipInjector helper (PYTHON .../vipinjector-helper "
                                                    "--config .../helper.json)" % (name, " ".join(argv))})
                j += 1
            if not run_seen:
                findings.append({"kind": "process-run", "value": name, "line": line,
                                 "message": "process %r has no run statement" % name})
            in_process.update(range(i, j + 1))
        elif low == "run" and prev in (";", "{", "}") and i not in in_process:
            findings.append({"kind": "process-run", "value": tok, "line": line,
                             "message": "a 'run' statement outside the helper's process block"})
        elif low == "processes-match":
            findings.append({"kind": "extra-process", "value": tok, "line": line,
                             "message": "'processes-match' selects processes by pattern: only "
                                        "'processes [ <the helper> ]' is allowed"})
        elif low in ("include", "import") and prev in (";", "{", "}"):
            findings.append({"kind": "include", "value": tok, "line": line,
                             "message": "'%s' pulls in configuration the role did not render" % tok})
        i += 1
    for i, (tok, line) in enumerate(toks):
        if tok.lower() == "processes":
            j = i + 1
            names = []
            while j < len(toks) and toks[j][0] not in (";", "}"):
                if toks[j][0] not in ("[", "]"):
                    names.append(toks[j][0])
                j += 1
            for name in names:
                if not processes or name != processes[0]:
                    findings.append({"kind": "extra-process", "value": name, "line": line,
                                     "message": "neighbour API lists process %r: only the helper's "
                                                "process may talk to ExaBGP" % name})
    if not processes:
        findings.append({"kind": "process-run", "value": "", "line": 1,
                         "message": "no process block: the helper is not configured"})
    depth = 0
    for tok, line in toks:
        depth += {"{": 1, "}": -1}.get(tok, 0)
        if depth < 0:
            findings.append({"kind": "syntax", "value": "}", "line": line,
                             "message": "a '}' closes a block that was never opened"})
            break
    if depth > 0:
        findings.append({"kind": "syntax", "value": "{", "line": toks[-1][1] if toks else 1,
                         "message": "%d block(s) never closed" % depth})
    return findings


def scan_exabgp_config(text, allocation):
    """Scan an ExaBGP configuration for anything announced outside the API.

    The VipInjector configuration announces nothing by itself (every route comes from the helper,
    so health decides). Returns a list of findings ``{"kind", "value", "line", "message"}`` (the
    message starts with the offending line's number and text); empty = clean:

    * ``foreign-prefix``: a route/flow/etc. names a prefix that is not this instance's task IP;
    * ``static-route``: a static route for the own task IP (would bypass the health check);
    * ``foreign-address``: any other IP literal that is neither a peer, a local address, a next
      hop nor a task IP of this instance;
    * ``route-keyword``: a route-bearing section (static, announce, flow, ...) with no prefix;
    * ``extra-process`` / ``process-run`` / ``include``: anything but exactly one process whose
      ``run`` is the helper, named by every neighbour's ``processes``; an include.
    """
    lines = (text or "").splitlines()
    toks = _tokens_with_lines(text or "")
    findings = _structure_findings(toks)
    tokens = [t for t, dummy in toks]
    allowed = allocation.addresses()
    in_route = 0
    depth_stack = []
    route_context = False
    for i, tok in enumerate(tokens):
        line = toks[i][1]
        if tok == "{":
            depth_stack.append(route_context)
            continue
        if tok == "}":
            route_context = depth_stack.pop() if depth_stack else False
            in_route = 0
            continue
        if tok == ";":
            in_route = 0
            continue
        low = tok.lower()
        prev = tokens[i - 1].lower() if i else ""
        if low in _ROUTE_KEYWORDS and prev not in ("process", "processes"):
            # 'family { ipv4 unicast; }' and 'capability { ... }' are not routes.
            if low in ("unicast", "multicast", "labeled-unicast", "mpls-vpn", "flow-vpn", "flow",
                       "vpls") and prev in ("ipv4", "ipv6", "l2vpn") and not route_context:
                continue
            if low == "route" and prev in ("route-refresh",):
                continue
            if low in ("static", "announce", "flow", "l2vpn") and i + 1 < len(tokens) and tokens[i + 1] == "{":
                route_context = True
                findings.append({"kind": "route-keyword", "value": tok, "line": line,
                                 "message": "configuration has a '%s' section: the VipInjector "
                                            "configuration announces nothing by itself" % tok})
                continue
            if low in ("route", "attribute", "attributes", "nlri") or route_context:
                in_route = 1
            continue
        # an address or a prefix? (an IPv6 zone is not part of any address we render)
        try:
            net = ipaddress.ip_network(tok, strict=False)
        except ValueError:
            if "%" in tok or "::" in tok or re.match(r"^\d+\.\d+\.\d+\.\d+", tok):
                findings.append({"kind": "foreign-address", "value": tok, "line": line,
                                 "message": "configuration names %r, an address form the role never "
                                            "renders" % tok})
            continue
        if "/" not in tok and (in_route or route_context) and prev not in ("next-hop",):
            net = ipaddress.ip_network(tok)
        if (in_route or route_context) and prev not in ("next-hop",):
            if net in allocation.prefixes:
                findings.append({"kind": "static-route", "value": str(net), "line": line,
                                 "message": "static route for the own task IP %s would bypass the "
                                            "health check and the drain file" % net})
            else:
                findings.append({"kind": "foreign-prefix", "value": str(net), "line": line,
                                 "message": "configuration announces %s, which is not this "
                                            "instance's task IP (allowed: %s)"
                                            % (net, ", ".join(str(p) for p in allocation.prefixes))})
            continue
        if net.prefixlen == net.max_prefixlen and net.network_address in allowed:
            continue
        findings.append({"kind": "foreign-address", "value": tok, "line": line,
                         "message": "configuration names %s, which is neither a peer, a local "
                                    "address, a next hop nor a task IP of this instance" % tok})
    # 'route-keyword' without any prefix is still a finding; drop it when a prefix finding exists
    # for the same section to keep the report short.
    if any(f["kind"] in ("foreign-prefix", "static-route") for f in findings):
        findings = [f for f in findings if f["kind"] != "route-keyword"]
    findings.sort(key=lambda f: f["line"])
    return [_located(f, lines, f["line"]) for f in findings]


def compare_with_rendered(text, rendered):
    """Findings where a configuration is not exactly the one the role rendered.

    ``rendered`` is the rendered configuration with its secrets redacted (the role writes it into
    the helper's JSON beside the real file); ``text`` is redacted the same way before the lines are
    compared, so no key is needed here. A second ``process`` block, an ``include``, a static route,
    another neighbour: any line the role did not write is refused, with the first such line named.
    No rendering to compare with is a refusal too.
    """
    if not isinstance(rendered, str) or not rendered:
        return [{"kind": "not-rendered", "value": "", "line": 0,
                 "message": "the helper's configuration carries no rendering (exabgp_config_rendered) to "
                            "compare the ExaBGP configuration with: only the rendered configuration may "
                            "run. Fix: deploy with the netscale.multinic.vipinjector role"}]
    have = redact(text or "").splitlines()
    want = redact(rendered).splitlines()
    if have == want:
        return []
    for number, (line, expected) in enumerate(zip(have + [None] * len(want), want + [None] * len(have)), 1):
        if line != expected:
            return [{"kind": "not-rendered", "value": "line %d: %s" % (number, line if line is not None else "(end)"),
                     "line": number,
                     "message": "configuration line %d is %r, the role rendered %r: only the rendered "
                                "configuration may run" % (number, line, expected)}]
    return []


def config_findings(text, helper_cfg, allocation=None):
    """The whole guard over a configuration text: not exactly what was rendered plus anything
    announced outside the API. Fails closed: a helper configuration without the rendering, or any
    error while checking, is a finding."""
    try:
        allocation = allocation or Allocation(helper_cfg["allocation"], helper_cfg["sessions"])
        findings = list(compare_with_rendered(text, helper_cfg.get("exabgp_config_rendered")))
        findings.extend(scan_exabgp_config(text, allocation))
    except Exception as exc:  # pylint: disable=broad-except
        return [{"kind": "guard-error", "value": type(exc).__name__, "line": 0,
                 "message": "the configuration guard could not check the configuration (%s: %s): "
                            "refusing to announce" % (type(exc).__name__, str(exc)[:200])}]
    return findings


# --------------------------------------------------------------------------------------------
# Pure state machine
# --------------------------------------------------------------------------------------------
class RiseFall(object):
    """Rise/fall debouncing. The first result decides at once; later flips need ``rise``
    consecutive successes (down -> up) or ``fall`` consecutive failures (up -> down)."""

    def __init__(self, rise=2, fall=3):
        if int(rise) < 1 or int(fall) < 1:
            raise ValueError("rise and fall must be >= 1 (got rise=%r fall=%r)" % (rise, fall))
        self.rise = int(rise)
        self.fall = int(fall)
        self.up = None  # unknown until the first result
        self.streak = 0
        self.last_result = None
        self.last_detail = ""

    def feed(self, ok, detail=""):
        """Record one result; return True when the state changed."""
        ok = bool(ok)
        self.last_result = ok
        self.last_detail = detail
        if self.up is None:
            self.up = ok
            self.streak = 0
            return True
        if ok == self.up:
            self.streak = 0
            return False
        self.streak += 1
        if self.streak >= (self.rise if ok else self.fall):
            self.up = ok
            self.streak = 0
            return True
        return False

    @property
    def is_up(self):
        return bool(self.up)


class HelperCore(object):
    """Desired-state logic, no I/O. Inputs are events; outputs are ExaBGP commands.

    A route is wanted on session S iff: not refused by the guard, health up, not drained,
    path check of S up. ``reconcile()`` returns the commands that move the announced state to the
    wanted one (every command passes the guard). ``session_up(peer)`` forgets what was announced
    on that session so the next reconcile re-announces it (ExaBGP also replays its RIB; a
    duplicate announce is harmless)."""

    def __init__(self, allocation, rise=2, fall=3, path_rise=2, path_fall=2):
        self.allocation = allocation
        self.health = RiseFall(rise, fall)
        self.paths = dict((peer, RiseFall(path_rise, path_fall)) for peer in allocation.sessions)
        self.drained = False
        self.nic_out = set()  # NIC indexes the host's NIC watcher took out of the egress set
        self.admin_nics = set()  # NIC indexes of the host's admin-drain marker (module_utils/drain_marker.py)
        self.admin_host = False  # the marker drains the whole host
        self.refused = []  # guard findings that put the instance in refused mode
        self.withdraw_foreign = []  # prefixes to withdraw on every session (refused mode)
        self.stopping = False
        self.announced = dict((peer, set()) for peer in allocation.sessions)
        self.session_state = dict((peer, "unknown") for peer in allocation.sessions)
        self.last_change = None
        self.last_reason = "start"
        self.refusals = 0

    # --- events
    def set_refused(self, findings):
        self.refused = list(findings)
        self.withdraw_foreign = sorted(set(f["value"] for f in findings
                                           if f["kind"] in ("foreign-prefix", "static-route")))

    def withdrawable(self):
        """Foreign prefixes the guard may withdraw (found in a refused configuration)."""
        return self.withdraw_foreign if self.refused else []

    def session_event(self, peer, state):
        if peer not in self.session_state:
            return
        self.session_state[peer] = state
        if state == "up":
            # ExaBGP keeps API routes per neighbor and replays them on establishment; the
            # helper re-sends its wanted state anyway (a duplicate announce is harmless).
            self.announced[peer] = set()

    def set_nic_out(self, out):
        """The watcher's out set (NIC indexes). Returns True when it changed."""
        out = set(int(k) for k in out)
        if out == self.nic_out:
            return False
        self.nic_out = out
        return True

    def set_admin(self, nics, host):
        """The host's admin-drain marker: drained NIC indexes and whether the whole host is drained.
        Returns True when it changed."""
        nics = set(int(k) for k in nics)
        if nics == self.admin_nics and bool(host) == self.admin_host:
            return False
        self.admin_nics, self.admin_host = nics, bool(host)
        return True

    def wanted(self, peer):
        if self.stopping or self.refused or self.drained or self.admin_host or not self.health.is_up:
            return set()
        if int(self.allocation.sessions[peer]["nic"]) in self.admin_nics:
            return set()
        path = self.paths[peer]
        if path.up is not None and not path.is_up:
            return set()
        if int(self.allocation.sessions[peer]["nic"]) in self.nic_out:
            return set()
        return set(self.allocation.prefixes)

    def reason(self, peer):
        if self.stopping:
            return "stopping"
        if self.refused:
            return "refused by guard"
        if self.drained:
            return "drained"
        if self.admin_host:
            return "host admin-drained"
        if int(self.allocation.sessions[peer]["nic"]) in self.admin_nics:
            return "NIC admin-drained"
        if not self.health.is_up:
            return "health check failing" if self.health.up is not None else "health unknown"
        path = self.paths[peer]
        if path.up is not None and not path.is_up:
            return "path check failing"
        if int(self.allocation.sessions[peer]["nic"]) in self.nic_out:
            return "NIC out of the host's egress set"
        return "healthy"

    def reconcile(self, now=None):
        """Commands to send now, each already checked by the guard."""
        cmds = []
        for peer, sess in self.allocation.sessions.items():
            want = self.wanted(peer)
            have = self.announced[peer]
            for p in sorted(want - have, key=str):
                fam = "ipv4" if p.version == 4 else "ipv6"
                nh = sess["next_hop"].get(fam)
                if nh is None:
                    continue
                cmds.append("neighbor %s announce route %s next-hop %s" % (peer, p, nh))
            for p in sorted(have - want, key=str):
                cmds.append("neighbor %s withdraw route %s" % (peer, p))
        out = []
        for c in cmds:
            try:
                parsed = self.allocation.check(c, self.withdrawable())
            except GuardError:
                self.refusals += 1
                continue
            peer = parsed["peer"]
            if parsed["action"] == "announce":
                self.announced[peer].add(parsed["prefix"])
            else:
                self.announced[peer].discard(parsed["prefix"])
            out.append(c)
        if out:
            self.last_change = time.time() if now is None else now
            self.last_reason = "; ".join(sorted(set("%s: %s" % (p, self.reason(p))
                                                    for p in self.allocation.sessions)))
        return out

    def refused_withdraws_for(self, peer):
        """On a session (re)establishment in refused mode: withdraw the foreign prefixes."""
        if not self.refused:
            return []
        return ["neighbor %s withdraw route %s" % (peer, p) for p in self.withdraw_foreign]

    def status(self, now=None):
        sessions = []
        for peer, sess in self.allocation.sessions.items():
            path = self.paths[peer]
            sessions.append({
                "nic": sess["nic"],
                "peer": str(peer),
                "local": str(sess["local"]),
                "state": self.session_state[peer],
                "path_ok": path.up,
                "path_detail": path.last_detail,
                "announced": sorted(str(p) for p in self.announced[peer]),
                "reason": self.reason(peer),
            })
        announced = sorted(set(str(p) for s in self.announced.values() for p in s))
        return {
            "version": STATUS_VERSION,
            "time": time.time() if now is None else now,
            "health": {"up": self.health.up, "detail": self.health.last_detail},
            "drained": self.drained,
            "guard": {"refused": bool(self.refused), "findings": self.refused,
                      "command_refusals": self.refusals},
            "sessions": sessions,
            "announced_prefixes": announced,
            "allocation": [str(p) for p in self.allocation.prefixes],
            "egress_out": sorted(self.nic_out),
            "admin_drain": {"host": self.admin_host, "nics": sorted(self.admin_nics)},
            "last_change": self.last_change,
            "last_change_reason": self.last_reason,
        }


def egress_out(data, now, stale_after):
    """NIC indexes out of the host's egress set from the NIC watcher's published state (see
    datapath/health.EGRESS_STATE_FILE); ``data``: its parsed JSON or None (no file). Returns
    (set, note). A state older than ``stale_after`` s (the watcher rewrites it every second while a NIC is
    out) or malformed counts as nothing out: a stopped or hung watcher must not keep a NIC withdrawn."""
    if data is None:
        return set(), "no egress state"
    try:
        out = set(int(k) for k in data.get("out") or [])
        age = now - float(data["updated"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return set(), "egress state malformed"
    if out and age > stale_after:
        return set(), "egress state stale (%.1f s old)" % age
    return out, "egress state ok"


def prometheus_text(status, instance):
    """Prometheus text exposition of a status dict (node_exporter textfile collector format)."""
    def esc(v):
        return str(v).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")
    lab = 'instance="%s"' % esc(instance)
    lines = [
        "# HELP netscale_vipinjector_health_up Workload health check state (1 up, 0 down).",
        "# TYPE netscale_vipinjector_health_up gauge",
        "netscale_vipinjector_health_up{%s} %d" % (lab, 1 if status["health"]["up"] else 0),
        "# HELP netscale_vipinjector_drained 1 while a drain file exists.",
        "# TYPE netscale_vipinjector_drained gauge",
        "netscale_vipinjector_drained{%s} %d" % (lab, 1 if status["drained"] else 0),
        "# HELP netscale_vipinjector_guard_refused 1 when the configuration was refused by the guard.",
        "# TYPE netscale_vipinjector_guard_refused gauge",
        "netscale_vipinjector_guard_refused{%s} %d" % (lab, 1 if status["guard"]["refused"] else 0),
        "# HELP netscale_vipinjector_guard_command_refusals_total Commands refused by the guard.",
        "# TYPE netscale_vipinjector_guard_command_refusals_total counter",
        "netscale_vipinjector_guard_command_refusals_total{%s} %d" % (lab, status["guard"]["command_refusals"]),
        "# HELP netscale_vipinjector_session_up BGP session state per NIC (1 established).",
        "# TYPE netscale_vipinjector_session_up gauge",
    ]
    for s in status["sessions"]:
        lines.append('netscale_vipinjector_session_up{%s,nic="%s",peer="%s"} %d'
                     % (lab, s["nic"], esc(s["peer"]), 1 if s["state"] == "up" else 0))
    lines += ["# HELP netscale_vipinjector_path_up Per-NIC path check state (1 up).",
              "# TYPE netscale_vipinjector_path_up gauge"]
    for s in status["sessions"]:
        lines.append('netscale_vipinjector_path_up{%s,nic="%s",peer="%s"} %d'
                     % (lab, s["nic"], esc(s["peer"]), 1 if s["path_ok"] else 0))
    lines += ["# HELP netscale_vipinjector_announced Prefix announced on a session (1) or not (0).",
              "# TYPE netscale_vipinjector_announced gauge"]
    for s in status["sessions"]:
        for p in status["allocation"]:
            lines.append('netscale_vipinjector_announced{%s,nic="%s",peer="%s",prefix="%s"} %d'
                         % (lab, s["nic"], esc(s["peer"]), p, 1 if p in s["announced"] else 0))
    lines += ["# HELP netscale_vipinjector_last_change_timestamp_seconds Time of the last announce/withdraw.",
              "# TYPE netscale_vipinjector_last_change_timestamp_seconds gauge",
              "netscale_vipinjector_last_change_timestamp_seconds{%s} %s"
              % (lab, "%.3f" % status["last_change"] if status["last_change"] else "0")]
    return "\n".join(lines) + "\n"
