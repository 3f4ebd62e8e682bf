# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names and small helpers shared by the section builders."""

from __future__ import annotations

import ipaddress
import re


def safe_name(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def slot_name(host_name, slot):
    """``<host>-S<slot>``: the stem of a task slot's peer-group, route-maps and prefix-lists."""
    return "%s-S%d" % (safe_name(host_name), slot)


def host_bits(family):
    return 32 if family == "ipv4" else 128


def strict_net(prefix):
    return ipaddress.ip_network(prefix, strict=True)


def families_of(prefixes):
    """The address families present in ``prefixes`` ({family: prefix}), IPv6 first."""
    return [f for f in ("ipv6", "ipv4") if f in prefixes]
