# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build steps "nodes" and "hosts": the lab's namespaces and what runs in them.

- FRR "boxes" (spine, ToRs) and the storage node: a long-lived holder PID in its own
  net+mount+uts namespace, with private /etc/frr, /etc/sysctl.d and /var/run/frr (bind mounts of
  per-node dirs), a private /run and a fresh sysfs; FRR daemons started inside with default paths, so
  `vtysh` and `frr-reload.py` work there unchanged.
- GPU hosts: systemd as PID 1 in its own pid/mount/uts/net/ipc/cgroup namespaces, overlayfs
  over the cached base image, pivot_root.
- Both: the interpreter Ansible runs there (``lab/interpreter.py``: python3 with a compile cache) bound
  at /run/netscale-lab-python from the node's directory, in the node's own /run, and its zygote, which
  forks the module runs (started by a box's script; a host's systemd unit ``mnl-lab-python.service``).
Every created object is journaled in the state file right away (``lab.state``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from ansible_collections.netscale.multinic.plugins.module_utils.lab import interpreter
from ansible_collections.netscale.multinic.plugins.module_utils.lab.proc import LabError, children, cmdline, run, start_time
from ansible_collections.netscale.multinic.plugins.module_utils.lab.system import netns_name, tail
from ansible_collections.netscale.multinic.plugins.module_utils.writing import atomic_write

BOX_SCRIPT = r"""
set -eu
name="$1"; d="$2"
mount --bind "$d" /mnt
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
mkdir -p /run/frr /run/lock
mount --bind /mnt/run-frr /run/frr
mount --bind /mnt/etc-frr /etc/frr
mount --bind /mnt/etc-sysctl.d /etc/sysctl.d
# the interpreter Ansible runs here (lab/interpreter.py), in the box's own /run
mkdir -p /run/netscale-lab-python
mount --bind /mnt/python /run/netscale-lab-python
umount /mnt
# Drop copies of other namespaces' bind mounts (they would keep those namespaces alive).
for m in $(findmnt -rn -t nsfs -o TARGET | sort -r); do umount -l "$m" 2>/dev/null || true; done
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
hostname "$name"
ip link set lo up
# the zygote that forks Ansible's module runs here (lab/interpreter.py): in this box's namespaces and cgroup
/usr/bin/python3 /run/netscale-lab-python/python3 --serve </dev/null &
echo ready > /run/frr/.box-ready
exec sleep infinity
"""

HOST_SCRIPT = r"""
set -eu
name="$1"; lower="$2"; d="$3"
m="$d/merged"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$d/upper,workdir=$d/work" "$m"
mount -t tmpfs -o mode=755,nosuid,size=65536k tmpfs "$m/dev"
for n in null zero full random urandom tty; do : > "$m/dev/$n"; mount --bind "/dev/$n" "$m/dev/$n"; done
mkdir -p "$m/dev/pts" "$m/dev/shm" "$m/dev/mqueue"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$m/dev/pts"
ln -s pts/ptmx "$m/dev/ptmx"
ln -s /proc/self/fd "$m/dev/fd"
ln -s /proc/self/fd/0 "$m/dev/stdin"; ln -s /proc/self/fd/1 "$m/dev/stdout"; ln -s /proc/self/fd/2 "$m/dev/stderr"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$m/dev/shm"
mount -t mqueue -o nosuid,nodev,noexec mqueue "$m/dev/mqueue"
mount -t proc -o nosuid,nodev,noexec proc "$m/proc"
mount --bind "$m/proc/sys" "$m/proc/sys"
mount --bind "$m/proc/sys/net" "$m/proc/sys/net"
mount -o remount,bind,ro "$m/proc/sys"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$m/sys"
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$m/sys/fs/cgroup"
mount -t bpf -o mode=700 bpf "$m/sys/fs/bpf"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$m/run"
# the interpreter Ansible runs here (lab/interpreter.py), in the host's own /run
mkdir -p "$m/run/netscale-lab-python"
mount --bind "$d/python" "$m/run/netscale-lab-python"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$m/tmp"
hostname "$name"
cd "$m"
mkdir -p .mnl-oldroot
pivot_root . .mnl-oldroot
cd /
umount -l /.mnl-oldroot
rmdir /.mnl-oldroot
exec env -i container=netscale-lab PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /lib/systemd/systemd --log-target=console
"""


def popen_in_cgroup(argv, cgroup, logpath):
    """Start ``argv`` in its own session inside ``cgroup`` (it joins before exec), output to ``logpath``."""
    def join_cgroup():
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write("0")
    logf = open(logpath, "ab")
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                preexec_fn=join_cgroup, start_new_session=True, close_fds=True)
    finally:
        logf.close()


def attach_netns(lab, name, pid):
    """Name the network namespace of ``pid`` after the node (ip netns attach)."""
    ns = netns_name(name)
    if os.path.exists("/run/netns/%s" % ns):
        raise LabError("network namespace %s already exists and is not in this lab's state; remove it "
                       "(ip netns del %s) or tear down the lab that made it" % (ns, ns))
    lab.state.add(type="netns", name=ns)
    run(["ip", "netns", "attach", ns, str(pid)])


# --- boxes (spine, ToRs, storage)
def start_boxes(lab, names=None):
    """Start the FRR/storage boxes (all of the spec's, or ``names``: an incremental change)."""
    boxes = [(n, k) for n, k in lab.spec.node_list() if k != "gpu_host" and (names is None or n in names)]
    started = []
    for name, kind in boxes:
        d = lab.node_dir(name)
        lab.mkdir(d)
        for sub in ("etc-frr", "run-frr"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            shutil.chown(os.path.join(d, sub), "frr", "frr")
        # The ToR role persists its sysctls in /etc/sysctl.d: a private one per box, so the lab
        # never writes the machine's own /etc.
        os.makedirs(os.path.join(d, "etc-sysctl.d"), exist_ok=True)
        interpreter.install(d)
        cg = lab.cg_dir(name)
        lab.mkcg(cg)
        p = popen_in_cgroup(
            ["unshare", "--net", "--mount", "--uts", "--propagation", "private", "--",
             "/bin/sh", "-c", BOX_SCRIPT, "mnl-box", name, d],
            cg, os.path.join(d, "box.log"))
        st = start_time(p.pid)
        lab.state.add(type="process", name="%s/holder" % name, pid=p.pid, started=st, node=name)
        lab.state.set_node(name, pid=p.pid, kind=kind, netns=netns_name(name), cgroup=cg, dir=d, started=st,
                           python=interpreter.IN_NODE_PATH)
        started.append((name, p, d))
    for name, p, d in started:
        _wait_file(os.path.join(d, "run-frr", ".box-ready"), p, name, os.path.join(d, "box.log"))
        attach_netns(lab, name, p.pid)
    wait_zygotes(lab, [name for name, _p, _d in started])


def _wait_file(path, proc, name, logpath, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise LabError("node %s: its namespace holder exited (rc=%s) before it was ready; log %s: %s"
                           % (name, proc.returncode, logpath, tail(logpath)))
        if time.monotonic() > deadline:
            raise LabError("node %s: not ready after %ss; log %s: %s" % (name, timeout, logpath, tail(logpath)))
        time.sleep(0.01)


# --- GPU hosts
def start_hosts(lab, rootfs, hosts=None):
    """Start the GPU hosts (all of the spec's, or ``hosts``: an incremental change)."""
    procs = []
    for h in (lab.spec.hosts if hosts is None else hosts):
        name = h["name"]
        d = lab.node_dir(name)
        lab.mkdir(d)
        _write_host_etc(d, name)
        interpreter.install(d)
        cg = lab.cg_dir(name)
        lab.mkcg(cg)
        p = popen_in_cgroup(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--net", "--ipc", "--cgroup",
             "--propagation", "private", "--", "/bin/sh", "-c", HOST_SCRIPT, "mnl-host", name, rootfs, d],
            cg, os.path.join(d, "console.log"))
        st = start_time(p.pid)
        lab.state.add(type="process", name="%s/unshare" % name, pid=p.pid, started=st, node=name)
        procs.append((h, p, d, cg))
    for h, p, d, cg in procs:
        name = h["name"]
        init = _wait_systemd(name, p, os.path.join(d, "console.log"))
        st = start_time(init)
        lab.state.add(type="process", name="%s/init" % name, pid=init, started=st, node=name)
        lab.state.set_node(name, pid=init, kind="gpu_host", netns=netns_name(name), cgroup=cg, dir=d,
                           started=st, unshare_pid=p.pid, rack=h["rack"], python=interpreter.IN_NODE_PATH)
        attach_netns(lab, name, init)
    wait_zygotes(lab, [h["name"] for h, _p, _d, _cg in procs])


def _write_host_etc(node_dir, name):
    for sub in ("upper", "work", "merged"):
        os.makedirs(os.path.join(node_dir, sub), exist_ok=True)
    etc = os.path.join(node_dir, "upper", "etc")
    os.makedirs(etc, exist_ok=True)
    atomic_write(os.path.join(etc, "hostname"), name + "\n")
    atomic_write(os.path.join(etc, "hosts"),
                 "127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost ip6-localhost ip6-loopback\n" % name)
    # the zygote of Ansible's module runs (lab/interpreter.py), started by the host's systemd at boot
    units = os.path.join(etc, "systemd", "system")
    os.makedirs(os.path.join(units, "multi-user.target.wants"), exist_ok=True)
    atomic_write(os.path.join(units, interpreter.ZYGOTE_UNIT), interpreter.ZYGOTE_UNIT_TEXT)
    link = os.path.join(units, "multi-user.target.wants", interpreter.ZYGOTE_UNIT)
    if not os.path.lexists(link):
        os.symlink("../" + interpreter.ZYGOTE_UNIT, link)


def wait_zygotes(lab, names, timeout=15.0):
    """Wait (``timeout`` s at most in all) for the zygote socket of every node in ``names``: module runs start
    from a node whose zygote listens. One that does not come up is no error: its runs go on without it, each a
    new python3 (lab/interpreter.py); the lab's tests of the interpreter say so."""
    deadline = time.monotonic() + timeout
    for name in names:
        sock = os.path.join(lab.node_dir(name), interpreter.NODE_SUBDIR, interpreter.SOCKET)
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)


def _wait_systemd(name, p, logpath, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        if p.poll() is not None:
            raise LabError("host %s: boot failed (unshare exited rc=%s); console %s: %s"
                           % (name, p.returncode, logpath, tail(logpath)))
        kids = children(p.pid)
        if kids:
            init = kids[0]
            cl = cmdline(init)
            if cl and cl[0].endswith("systemd") and os.path.exists("/proc/%d/root/run/systemd/private" % init):
                return init
        if time.monotonic() > deadline:
            raise LabError("host %s: systemd not running after %ss; console %s: %s"
                           % (name, timeout, logpath, tail(logpath)))
        time.sleep(0.02)
