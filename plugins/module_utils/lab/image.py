# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Base root filesystem of the lab GPU hosts: debootstrap minbase bookworm with systemd.

Cached under /var/cache/netscale-multinic/images/<key>/rootfs where <key> is the sha256 of the
package list (plus suite and variant); it is rebuilt only when that list changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, run
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

CACHE_DIR = "/var/cache/netscale-multinic/images"
SUITE = "bookworm"
VARIANT = "minbase"
# What the roles need on a lab host. Changing this list changes the cache key (and rebuilds).
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    "python3-venv",
    "iproute2",
    "nftables",
    "iputils-ping",
    "procps",
    "iperf3",
    # host_datapath loads and pins the eBPF programs with bpftool (the object is built on the controller).
    "bpftool",
    # the BFD responder beside each sidecar (vipinjector_bfd: zebra + bfdd per slot namespace)
    "frr",
)
# Units that need a console or hardware, or wait for input on first boot.
MASKED_UNITS = (
    "systemd-firstboot.service",
    "console-getty.service",
    "getty@.service",
    "serial-getty@.service",
    "getty.target",
    "systemd-udevd.service",
    "systemd-modules-load.service",
    "modprobe@.service",
    "e2scrub_reap.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "iperf3.service",
    # FRR runs per slot namespace (netscale-vipinjector-{zebra,bfd}@), never as the host's own routing daemon
    "frr.service",
)
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def image_key(packages=PACKAGES, suite=SUITE, variant=VARIANT, masked=MASKED_UNITS):
    text = "\n".join(["suite=" + suite, "variant=" + variant] + sorted(packages) + ["mask=" + u for u in sorted(masked)])
    return hashlib.sha256(text.encode()).hexdigest()


def system_mirror(path="/etc/apt/sources.list.d/debian.sources"):
    """First Debian mirror URI of this machine (deb822 sources), or deb.debian.org."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("URIs:"):
                    uri = line.split(":", 1)[1].split()[0]
                    if "security" not in uri:
                        return uri
    except OSError:
        pass
    return DEFAULT_MIRROR


def image_path(key=None, cache_dir=CACHE_DIR):
    return os.path.join(cache_dir, key or image_key(), "rootfs")


def image_ready(key=None, cache_dir=CACHE_DIR):
    key = key or image_key()
    return os.path.exists(os.path.join(cache_dir, key, "image.json"))


def ensure_image(cache_dir=CACHE_DIR, mirror=None, log=None):
    """Return (rootfs path, info dict, built: bool). Builds under a lock when missing."""
    key = image_key()
    top = os.path.join(cache_dir, key)
    os.makedirs(cache_dir, exist_ok=True)
    with open(os.path.join(cache_dir, ".lock"), "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        meta = os.path.join(top, "image.json")
        if os.path.exists(meta):
            with open(meta) as f:
                return os.path.join(top, "rootfs"), json.load(f), False
        tmp = top + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        rootfs = os.path.join(tmp, "rootfs")
        mirror = mirror or system_mirror()
        t0 = time.monotonic()
        argv = [
            "debootstrap", "--variant=" + VARIANT, "--include=" + ",".join(PACKAGES),
            SUITE, rootfs, mirror,
        ]
        if log:
            log("image: building %s (%s)" % (key[:12], " ".join(argv)))
        try:
            run(argv, timeout=1800)
        except LabError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise LabError("image build failed (debootstrap from %s): %s" % (mirror, e))
        _finish_rootfs(rootfs)
        info = {
            "key": key,
            "suite": SUITE,
            "variant": VARIANT,
            "packages": list(PACKAGES),
            "masked_units": list(MASKED_UNITS),
            "mirror": mirror,
            "build_seconds": round(time.monotonic() - t0, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        atomic_write(os.path.join(tmp, "image.json"), json.dumps(info, indent=1))
        os.rename(tmp, top)
        return os.path.join(top, "rootfs"), info, True


def _finish_rootfs(rootfs):
    # Every host must get its own machine-id: an empty file makes systemd generate one at boot.
    with open(os.path.join(rootfs, "etc/machine-id"), "w"):
        pass
    dbus_id = os.path.join(rootfs, "var/lib/dbus/machine-id")
    if os.path.lexists(dbus_id) and not os.path.islink(dbus_id):
        os.unlink(dbus_id)
    unitdir = os.path.join(rootfs, "etc/systemd/system")
    os.makedirs(unitdir, exist_ok=True)
    for unit in MASKED_UNITS:
        link = os.path.join(unitdir, unit)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink("/dev/null", link)
    # The machine-wide apt caches are not needed in every host.
    shutil.rmtree(os.path.join(rootfs, "var/cache/apt/archives"), ignore_errors=True)
    os.makedirs(os.path.join(rootfs, "var/cache/apt/archives/partial"), exist_ok=True)
    for d in ("sys/fs/bpf", "run/netns"):
        os.makedirs(os.path.join(rootfs, d), exist_ok=True)
