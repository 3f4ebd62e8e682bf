# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""BFD session state for the NIC watcher: FRR bfdd control-socket messages and the per-NIC rule.

Pure logic (no I/O, unit-tested); the watcher (:mod:`.watcher`) owns the sockets.

The host side of BFD (roles/vipinjector, :mod:`..vipinjector.bfd`) runs one FRR bfdd per task slot,
each with its control socket ``<bfd_dir>/slot<s>/bfdd.sock`` (FRR ``--bfdctl``; bfdd/bfdctl.h,
bfdd/control.c). A client sends a ``BMT_NOTIFY`` message whose payload is the 64-bit notify mask in
host byte order; bfdd answers with a ``BMT_RESPONSE`` (JSON ``{"status": "ok"}``), then sends one
``BMT_NOTIFY`` (JSON ``{"op": "status", "peer-address": ..., "local-address": ...,
"local-interface": ..., "state": "up" | "down" | "init" | "adm-down", ...}``) per session at once
and one per state change afterwards. Header (``struct bfd_control_msg``): 32-bit payload length
(network order), 16-bit id, 8-bit type, 8-bit version (1).

The rule (issue 12 item 2): a session counts once it has been Up since the watcher (re)connected
to its responder. A NIC is *BFD-down* when it has counted sessions and none of them is Up; it is
BFD-up again as soon as one is Up. A session that never came up (e.g. a ToR without BFD) never takes a
NIC out; an administratively shut session (``adm-down``) stops counting until it is Up again; a lost
control socket (responder restarted) forgets its sessions - that is not a BFD failure.
Sessions map to NICs by their peer address: the ToR's gateway on that NIC (``gw4``/``gw6`` of the
watcher's ``detect`` block), as the BGP sessions of the sidecar.
"""

from __future__ import annotations

import ipaddress
import json
import struct

BMV_VERSION_1 = 1
BMT_RESPONSE = 1
BMT_NOTIFY = 4
BCM_NOTIFY_PEER_STATE = 1
HEADER = "!IHBB"   # bcm_length (network order), bcm_id, bcm_type, bcm_ver
HEADER_LEN = struct.calcsize(HEADER)
MAX_PAYLOAD = 1 << 20
SOCKET_GLOB = "slot*/bfdd.sock"   # under the vipinjector role's BFD runtime directory


def notify_request(mask=BCM_NOTIFY_PEER_STATE, msg_id=1):
    """The message that subscribes a control-socket client to session state (``mask`` in host order,
    as bfdd memcpy()s it)."""
    payload = struct.pack("=Q", mask)
    return struct.pack(HEADER, len(payload), msg_id, BMT_NOTIFY, BMV_VERSION_1) + payload


class Decoder(object):
    """Splits the byte stream of one control socket into ``(type, id, dict)`` messages.

    Raises ValueError on a message that cannot come from bfdd (bad version, oversized payload);
    the caller drops the connection. A payload that is not a JSON object decodes to ``{}``.
    """

    def __init__(self):
        self.buf = b""

    def feed(self, data):
        self.buf += data
        out = []
        while len(self.buf) >= HEADER_LEN:
            length, msg_id, mtype, ver = struct.unpack(HEADER, self.buf[:HEADER_LEN])
            if ver != BMV_VERSION_1 or length > MAX_PAYLOAD:
                raise ValueError("bfdd control message: version %d, length %d" % (ver, length))
            if len(self.buf) < HEADER_LEN + length:
                break
            raw = self.buf[HEADER_LEN:HEADER_LEN + length]
            self.buf = self.buf[HEADER_LEN + length:]
            try:
                body = json.loads(raw.rstrip(b"\0").decode("utf-8", "replace"))
            except ValueError:
                body = {}
            out.append((mtype, msg_id, body if isinstance(body, dict) else {}))
        return out


def session_state(body):
    """``(key, peer, state, label)`` of a peer-status notification, else None (responses, config)."""
    if body.get("op") != "status" or not body.get("peer-address") or not body.get("state"):
        return None
    peer = _norm(body["peer-address"])
    if peer is None:
        return None
    local = _norm(body.get("local-address") or "") or ""
    key = (peer, local, body.get("local-interface") or "", bool(body.get("multihop")), body.get("vrf-name") or "")
    label = "%s -> %s%s" % (local or "?", peer, (" dev " + body["local-interface"]) if body.get("local-interface") else "")
    return key, peer, str(body["state"]), label


def _norm(addr):
    try:
        return str(ipaddress.ip_address(addr))
    except ValueError:
        return None


class _Session(object):
    def __init__(self, nic, label):
        self.nic = nic
        self.label = label
        self.state = None
        self.counted = False   # Up at least once since (re)connect


class Tracker(object):
    """Per-NIC BFD aggregation over every responder (source = control-socket path).

    ``nics``: the detect block's NIC entries (``name``, ``gw4``/``gw6``). ``update`` and ``lost``
    return the NIC-level transitions they caused: ``[(nic, "down" | "up", reason)]``.
    """

    def __init__(self, nics):
        self.by_gw = {}
        for n in nics:
            for key in ("gw4", "gw6"):
                a = _norm(n.get(key) or "")
                if a:
                    self.by_gw[a] = n["name"]
        self.names = [n["name"] for n in nics]
        self.sessions = {}   # (source, key) -> _Session
        self.down = set()    # NICs BFD-down

    def nic_of(self, peer):
        return self.by_gw.get(peer)

    def _counted(self, nic):
        return [s for s in self.sessions.values() if s.nic == nic and s.counted]

    def _eval(self, nics):
        out = []
        for nic in sorted(nics):
            counted = self._counted(nic)
            is_down = bool(counted) and not any(s.state == "up" for s in counted)
            if is_down and nic not in self.down:
                self.down.add(nic)
                out.append((nic, "down", "bfd: %s down" % (
                    "all %d sessions" % len(counted) if len(counted) > 1 else "session")
                    + " (%s)" % ", ".join(sorted("%s %s" % (s.label, s.state) for s in counted))))
            elif not is_down and nic in self.down:
                self.down.discard(nic)
                up = [s.label for s in counted if s.state == "up"]
                out.append((nic, "up", "bfd: %s" % ("session %s up" % up[0] if up else "no session counts any more")))
        return out

    def update(self, source, body):
        """A message of ``source``'s bfdd (the decoded JSON object)."""
        st = session_state(body)
        if st is None:
            return []
        key, peer, state, label = st
        nic = self.nic_of(peer)
        if nic is None:
            return []   # not a session towards one of this host's gateways
        s = self.sessions.get((source, key))
        if s is None:
            s = self.sessions[(source, key)] = _Session(nic, "%s %s" % (short_source(source), label))
        s.state = state
        if state == "up":
            s.counted = True
        elif state == "adm-down":
            s.counted = False
        return self._eval([nic])

    def lost(self, source):
        """The control socket of ``source`` is gone (responder stopped or restarted): forget its sessions."""
        nics = set()
        for k in [k for k in self.sessions if k[0] == source]:
            nics.add(self.sessions.pop(k).nic)
        return self._eval(nics)

    def summary(self):
        """{nic: (sessions up, sessions counted, sessions known)}."""
        out = {}
        for nic in self.names:
            known = [s for s in self.sessions.values() if s.nic == nic]
            out[nic] = (sum(1 for s in known if s.counted and s.state == "up"), sum(1 for s in known if s.counted),
                        len(known))
        return out


def short_source(source):
    """``slot1`` of ``/run/netscale-vipinjector-bfd/slot1/bfdd.sock``."""
    parts = [p for p in str(source).split("/") if p]
    return parts[-2] if len(parts) >= 2 else str(source)
