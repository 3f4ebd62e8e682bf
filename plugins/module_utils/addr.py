# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small address helpers for templates (exposed as filter plugins). Standard library only."""

from __future__ import annotations

import ipaddress


def ip_address(value):
    """'fd00::1/64' or 'fd00::1' -> 'fd00::1'."""
    return str(ipaddress.ip_interface(str(value)).ip)


def prefix_length(value):
    """'198.18.0.0/27' -> 27; a bare address gives its full length (32 or 128)."""
    return ipaddress.ip_interface(str(value)).network.prefixlen


def ip_version(value):
    """4 or 6 for an address or prefix."""
    return ipaddress.ip_interface(str(value)).version


def host_prefix(value):
    """The host route of an address: 'fd00::1' -> 'fd00::1/128', '198.18.0.1' -> '198.18.0.1/32'."""
    ip = ipaddress.ip_interface(str(value)).ip
    return "%s/%d" % (ip, ip.max_prefixlen)
