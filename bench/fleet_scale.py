"""Fleet-scale benchmark: what the collection costs the controller at 10K, 30K and 125K hosts.

For each fabric it prints wall, CPU and peak memory of:

  planner core   validate + plan the topology file in one process (the reference of the ratios)
  inventory      the fabric inventory through Ansible: a no-op play (``hosts: all[0]``, one
                 ``ansible.builtin.debug``, ``gather_facts: false``; wall until its task starts and to
                 the end), ``ansible-inventory --graph`` and ``ansible-inventory --host NAME``
  plan.yml       ``ansible-playbook playbooks/plan.yml`` end to end, writing intended/ (a fresh one)
  render         one play running ``netscale.multinic.tor_render`` for every ToR and spine, writing
                 their configs (a fresh dest)
  preflight      ``ansible-playbook playbooks/rollout.yml`` (defaults: canary = first rack, waves 5/25/100 %)
                 on the intended/ that plan.yml wrote, until its second play (ToRs and spines reachable)
                 starts - everything before the first device is contacted: names, lease, inventory checks,
                 plan check and write, journal open with the wave plan, the wave's hosts and ToRs added,
                 report start; the command is stopped there (its process group), nothing reaches a device.
                 CPU counts the parent and the workers it reaped by then.

Each Ansible command runs in its own transient memory cgroup (a child of this process's cgroup,
v1 or v2): "cgroup peak" is the whole controller with its forked workers (memory.peak /
memory.max_usage_in_bytes; page cache of the files it writes included), "peak RSS" is the largest
single process (wait4's ru_maxrss over the process tree), CPU is user + system of the whole tree.
Without a writable cgroup the cgroup column says n/a.

Fabrics (bench/plan_scale.py's synthetic generator; IPv6 only):
  region_100k_8nic  12,544 GPU hosts, most with 8 NICs (~100K GPUs)      "10K"
  region_100k       30,219 GPU hosts, 2 or 4 NICs (the 100K-GPU region)  "30K"
  metro_1m          125,440 GPU hosts, 4 NICs (the 1M-GPU region)       "125K"

    flock /work/heavy.lock .venv/bin/python bench/fleet_scale.py               # all three (~15 min)
    flock /work/heavy.lock .venv/bin/python bench/fleet_scale.py --only region_100k
    .venv/bin/python bench/fleet_scale.py --quick                              # 94 hosts, CI smoke

``--limit-gb`` caps each command's memory (cgroup limit, else RLIMIT_AS) to protect a shared machine.
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, ".build"))

from ansible_collections.netscale.multinic.bench import plan_scale  # noqa: E402  (the synthetic fabrics)

SCENARIOS = {"quick": "quick", "10K": "region_100k_8nic", "30K": "region_100k", "125K": "metro_1m"}
FULL = ("10K", "30K", "125K")

NOOP_PLAY = """- name: No-op
  hosts: all[0]
  gather_facts: false
  tasks:
    - name: Started
      ansible.builtin.debug:
        msg: started
"""

RENDER_PLAY = """- name: Render every ToR and spine config of the fabric
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Render
      netscale.multinic.tor_render:
        topology: "{{ ansible_inventory_sources | first }}"
        dest: "{{ fleet_render_dest }}"
"""


# -- memory cgroup of one command -------------------------------------------------------------------
def _own_cgroup():
    """(version, directory) of this process's memory cgroup, or None."""
    try:
        with open("/proc/self/cgroup") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = "/sys/fs/cgroup/memory"
            if os.path.isdir(base):
                return 1, base + path
    for line in lines:
        if line.startswith("0::") and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            return 2, "/sys/fs/cgroup" + line[3:]
    return None


class Cgroup(object):
    """A transient child memory cgroup; ``peak()`` in bytes or None."""

    def __init__(self, limit_bytes=None):
        self.path = None
        own = _own_cgroup()
        if not own:
            return
        self.version, parent = own
        path = os.path.join(parent, "fleet-scale-%d-%d" % (os.getpid(), time.monotonic_ns()))
        try:
            os.mkdir(path)
        except OSError:
            return
        self.path = path
        if limit_bytes:
            self._write("memory.max" if self.version == 2 else "memory.limit_in_bytes", str(limit_bytes))

    def _write(self, name, value):
        try:
            with open(os.path.join(self.path, name), "w") as handle:
                handle.write(value)
            return True
        except OSError:
            return False

    def join(self):
        """In the child before exec: enter the cgroup."""
        if self.path and not self._write("cgroup.procs", str(os.getpid())):
            self.path = None

    def peak(self):
        if not self.path:
            return None
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            with open(os.path.join(self.path, name)) as handle:
                return int(handle.read().split()[0])
        except (OSError, ValueError):
            return None

    def remove(self):
        if self.path:
            try:
                os.rmdir(self.path)
            except OSError:
                pass


def measure(argv, cwd, env, limit_bytes=None, marker=None, stop_at_marker=False):
    """Run ``argv``; wall, CPU (user+system of the tree), peak RSS of the largest process, cgroup peak
    of the whole tree, rc, output tail and (with ``marker``) the wall until ``marker`` first appears;
    ``stop_at_marker``: the command's process group is stopped there (rc 0 when the marker was seen)."""
    cg = Cgroup(limit_bytes)
    use_cg = cg.path is not None

    def pre():
        if use_cg:
            cg.join()
        elif limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=pre,  # pylint: disable=subprocess-popen-preexec-fn
                            start_new_session=stop_at_marker)
    seen = {}
    lines = []

    def reader():
        for line in proc.stdout:
            if marker and "marker" not in seen and marker in line:
                seen["marker"] = time.perf_counter() - t0
                if stop_at_marker:
                    os.killpg(proc.pid, signal.SIGTERM)
            lines.append(line)
            del lines[:-200]
    thread = threading.Thread(target=reader)
    thread.start()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    thread.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if stop_at_marker:
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # workers left behind by the stopped parent
        except ProcessLookupError:
            pass
        if "marker" in seen:
            proc.returncode = 0
    peak = cg.peak()
    cg.remove()
    return {"rc": proc.returncode, "wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "rss_mib": round(usage.ru_maxrss / 1024.0), "cgroup_mib": None if peak is None else round(peak / 2.0 ** 20),
            "to_marker_s": None if "marker" not in seen else round(seen["marker"], 2), "tail": "".join(lines[-30:])}


# -- phases ---------------------------------------------------------------------------------------
def planner_core(topology_file):
    """Read and plan the topology file in a child process: wall, CPU, peak RSS."""
    code = ("import json,resource,sys,time\n"
            "sys.path.insert(0, %r)\n"
            "from ansible_collections.netscale.multinic.plugins.module_utils.plan.job import load_plan\n"
            "t, c = time.perf_counter(), time.process_time()\n"
            "plan = load_plan(%r)\n"
            "print(json.dumps({'wall_s': round(time.perf_counter() - t, 2), 'cpu_s': round(time.process_time() - c, 2),"
            " 'rss_mib': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0),"
            " 'hosts': len(plan.topo.hosts), 'racks': len(plan.topo.racks), 'spines': len(plan.topo.spines),"
            " 'nics': sum(h.nics for h in plan.topo.hosts)}))\n") % (os.path.join(ROOT, ".build"), topology_file)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def write_topology(scenario, folder):
    data = dict({"plugin": "netscale.multinic.fabric"}, **plan_scale.synthetic(scenario))
    path = os.path.join(folder, scenario + ".yml")
    import yaml
    with open(path, "w") as handle:
        yaml.dump(data, handle, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    return path


def run_scenario(label, args, env):
    scenario = SCENARIOS[label]
    work = tempfile.mkdtemp(prefix="mn-fleet-%s-" % scenario)
    limit = int(args.limit_gb * 2 ** 30) if args.limit_gb else None
    out = {"label": label, "scenario": scenario}
    try:
        topo = write_topology(scenario, work)
        out["topology_mib"] = round(os.path.getsize(topo) / 2.0 ** 20, 1)
        for name, text in (("noop.yml", NOOP_PLAY), ("render.yml", RENDER_PLAY)):
            with open(os.path.join(work, name), "w") as handle:
                handle.write(text)
        out["core"] = core = planner_core(topo)
        print("   .. %s core: %s" % (scenario, json.dumps(core)), flush=True)
        first_host = "h1-1-1-1"
        steps = [
            ("noop", ["ansible-playbook", "-i", topo, os.path.join(work, "noop.yml")], "TASK ["),
            ("graph", ["ansible-inventory", "-i", topo, "--graph"], None),
            ("host", ["ansible-inventory", "-i", topo, "--host", first_host], None),
            ("plan", ["ansible-playbook", "-i", topo, os.path.join(ROOT, "playbooks", "plan.yml"),
                      "-e", "fabric_intended_dir=%s" % os.path.join(work, "intended")], "TASK ["),
            ("render", ["ansible-playbook", "-i", topo, os.path.join(work, "render.yml"),
                        "-e", "fleet_render_dest=%s" % os.path.join(work, "rendered")], "TASK ["),
        ]
        # the rollout's preflight on the intended/ plan.yml wrote (a rollout follows a plan), stopped when
        # the first device would be contacted
        steps.append(("preflight", ["ansible-playbook", "-i", topo, os.path.join(ROOT, "playbooks", "rollout.yml"),
                                    "-e", "rollout_intended_dir=%s" % os.path.join(work, "intended"),
                                    "-e", "rollout_report_root=%s" % os.path.join(work, "reports")],
                      "PLAY [Rollout | ToRs and spines reachable]"))
        for name, argv, marker in steps:
            if name in args.skip:
                continue
            if name == "preflight" and "plan" in args.skip:
                print("   .. preflight needs plan.yml's intended/: not run (plan skipped)")
                continue
            result = measure(argv, ROOT, env, limit, marker, stop_at_marker=(name == "preflight"))
            if result["rc"] != 0:
                print("   %s FAILED rc=%d:\n%s" % (name, result["rc"], result["tail"]))
            if name == "render":
                folder = os.path.join(work, "rendered", "configs")
                result["configs"] = len(os.listdir(folder)) if os.path.isdir(folder) else 0
            if name == "plan":
                result["files"] = sum(len(f) for _b, _d, f in os.walk(os.path.join(work, "intended")))
            out[name] = result
            print("   .. %s: %s" % (name, json.dumps(dict((k, v) for k, v in result.items() if k != "tail"))), flush=True)
            if name != "render":
                shutil.rmtree(os.path.join(work, "rendered"), ignore_errors=True)
        report(out)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mem(r):
    cg = "n/a" if r["cgroup_mib"] is None else "%d MiB" % r["cgroup_mib"]
    return "peak RSS %d MiB, cgroup peak %s" % (r["rss_mib"], cg)


def report(out):
    core = out["core"]
    print("== %s (%s): %d GPU hosts, %d ToRs, %d spines, %d NICs; topology file %.1f MiB"
          % (out["label"], out["scenario"], core["hosts"], core["racks"], core["spines"], core["nics"],
             out["topology_mib"]))
    print("   planner core (read + validate + plan, one process): %.2f s wall, %.2f s CPU, peak RSS %d MiB"
          % (core["wall_s"], core["cpu_s"], core["rss_mib"]))
    ref = max(core["cpu_s"], 0.01)
    rows = (("noop", "inventory, no-op play"), ("graph", "ansible-inventory --graph"),
            ("host", "ansible-inventory --host"), ("plan", "plan.yml (writes intended/)"),
            ("render", "render every ToR + spine"), ("preflight", "rollout.yml preflight"))
    for key, title in rows:
        r = out.get(key)
        if not r:
            continue
        extra = ""
        if key in ("noop", "plan", "render") and r["to_marker_s"] is not None:
            extra = ", first task at %.2f s" % r["to_marker_s"]
        if key == "preflight":
            extra = ", stopped where the first device is contacted" if r["to_marker_s"] is not None else \
                ", never reached the device plays"
        if key == "plan":
            extra += ", %d files" % r.get("files", 0)
        if key == "render":
            extra += ", %d configs" % r.get("configs", 0)
        status = "" if r["rc"] == 0 else " [rc=%d]" % r["rc"]
        print("   %-28s %7.2f s wall, %7.2f s CPU (%.1fx planner core CPU), %s%s%s"
              % (title, r["wall_s"], r["cpu_s"], r["cpu_s"] / ref, _mem(r), extra, status))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the 94-host fabric only (CI smoke)")
    ap.add_argument("--only", action="append", choices=sorted(SCENARIOS) + sorted(SCENARIOS.values()),
                    help="run only this fabric (repeatable): 10K, 30K, 125K or a scenario name")
    ap.add_argument("--skip", action="append", default=[], choices=("noop", "graph", "host", "plan", "render", "preflight"),
                    help="skip a phase (repeatable)")
    ap.add_argument("--limit-gb", type=float, default=None, help="memory limit of each command")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    by_name = dict((v, k) for k, v in SCENARIOS.items())
    labels = ["quick"] if args.quick else [by_name.get(o, o) for o in args.only] if args.only else list(FULL)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="default",
               PATH=os.path.join(ROOT, ".venv", "bin") + os.pathsep + os.environ.get("PATH", ""))
    results = []
    failed = False
    for label in labels:
        out = run_scenario(label, args, env)
        failed = failed or any(isinstance(v, dict) and v.get("rc") for v in out.values())
        results.append(out)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([dict((k, (dict((kk, vv) for kk, vv in v.items() if kk != "tail") if isinstance(v, dict) else v))
                            for k, v in r.items()) for r in results], handle, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
