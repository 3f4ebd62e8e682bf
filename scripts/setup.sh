#!/usr/bin/env bash
# One-time, idempotent set-up of a Debian 12 machine for netscale.multinic:
# apt packages (lab + datapath toolchain), a virtualenv with the pinned Python
# dependencies, and the collection linked where Ansible finds it. Safe to re-run;
# each step is skipped when already done.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

apt_packages=(
  python3 python3-venv python3-dev gcc git rsync jq
  iproute2 nftables iputils-ping procps util-linux psmisc
  frr frr-pythontools iperf3 debootstrap mptcpize
  clang llvm libbpf-dev bpftool
  openjdk-17-jre-headless
  prometheus prometheus-frr-exporter
)

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "setup: '$*' needs root (run as root or with sudo)" >&2
    exit 1
  fi
}

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  need_root apt-get install
  echo "setup: installing apt packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts FRR's own service when an init system exists; the lab runs its own daemons
# in namespaces, so the machine-wide instance must not hold the ports or the kernel routes.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now frr >/dev/null 2>&1 || true
  # likewise Prometheus and the FRR exporter: the lab runs its own, in the foreground, bound to loopback
  # (netscale.multinic.lab_monitoring), with its own config and data dir
  systemctl disable --now prometheus prometheus-frr-exporter >/dev/null 2>&1 || true
fi

venv="$here/.venv"
stamp="$venv/.requirements.sha256"
want=$(cat requirements.txt requirements-test.txt | sha256sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating virtualenv $venv"
  python3 -m venv "$venv"
  # (grep: this machine's pip config names local mirrors that may be absent; pip warns per package)
  "$venv/bin/pip" install -q --upgrade pip 2>&1 | { grep -v "WARNING: Location" || true; }
  "$venv/bin/pip" install -q -r requirements.txt -r requirements-test.txt 2>&1 | { grep -v "WARNING: Location" || true; }
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "setup: pip install failed" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
# Event-Driven Ansible (extensions/eda/): ansible-rulebook, pinned in its own file (requirements-eda.txt) with
# its own stamp; it runs with the Java 17 runtime above (docs/remediation-eda.md).
eda_stamp="$venv/.requirements-eda.sha256"
want_eda=$(cat requirements-eda.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$eda_stamp" 2>/dev/null)" != "$want_eda" ] || [ ! -x "$venv/bin/ansible-rulebook" ]; then
  echo "setup: installing requirements-eda.txt (ansible-rulebook)"
  "$venv/bin/pip" install -q -r requirements-eda.txt 2>&1 | { grep -v "WARNING: Location" || true; }
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "setup: pip install (requirements-eda.txt) failed" >&2; exit 1; }
  echo "$want_eda" > "$eda_stamp"
fi

# ansible-test sanity wants its own exact tool versions (pylint, yamllint, ...): a separate venv
# with ansible-core and ansible-test's pinned sanity requirements.
sanity="$here/.cache/sanity-venv"
reqdir="$venv/lib/python3.11/site-packages/ansible_test/_data/requirements"
[ -d "$reqdir" ] || reqdir=$("$venv/bin/python" -c 'import ansible_test,os;print(os.path.join(os.path.dirname(ansible_test.__file__),"_data","requirements"))')
core=$(grep '^ansible-core==' requirements.txt)
sanity_reqs=()
for t in validate-modules pylint pep8 yamllint import import.plugin ansible-doc changelog runtime-metadata integration-aliases; do
  sanity_reqs+=(-r "$reqdir/sanity.$t.txt")
done
want_sanity=$( (echo "$core"; cat "$reqdir"/sanity.*.txt) | sha256sum | cut -d' ' -f1)
if [ ! -x "$sanity/bin/ansible-test" ] || [ "$(cat "$sanity/.stamp" 2>/dev/null)" != "$want_sanity" ]; then
  echo "setup: creating sanity virtualenv $sanity"
  rm -rf "$sanity"
  python3 -m venv "$sanity"
  "$sanity/bin/pip" install -q "$core" "${sanity_reqs[@]}" 2>&1 | { grep -v "WARNING: Location" || true; }
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "setup: pip install (sanity) failed" >&2; exit 1; }
  echo "$want_sanity" > "$sanity/.stamp"
fi
# ansible-test bootstraps pip in its per-test venvs from a host that is not reachable from CI;
# it uses a cached bootstrap script when present (see scripts/get-pip-standin.py).
mkdir -p "$HOME/.ansible/test/cache"
cp "$here/scripts/get-pip-standin.py" "$HOME/.ansible/test/cache/get_pip_24_2.py"

# The lab's vault password (inventories/lab/group_vars/all/vault.yml holds the lab's TCP-MD5 secret;
# scripts/main.sh, scripts/test.sh and the tests export it as ANSIBLE_VAULT_PASSWORD_FILE). It protects LAB keys only, which is why it may live
# here: a real fabric uses its own vault and password, never this one (docs/security.md).
mkdir -p "$here/.cache"
lab_vault_password="netscale-lab-vault-fWdkKcYq9igjI4EXMd5BYH4P"
vault_file="$here/.cache/lab-vault-password"
if [ ! -f "$vault_file" ] || [ "$(cat "$vault_file")" != "$lab_vault_password" ]; then
  (umask 077 && printf '%s\n' "$lab_vault_password" > "$vault_file.tmp" && mv -f "$vault_file.tmp" "$vault_file")
fi
chmod 0600 "$vault_file"

# Ansible resolves netscale.multinic through .build/ansible_collections (see ansible.cfg).
mkdir -p .build/ansible_collections/netscale
ln -sfn "$here" .build/ansible_collections/netscale/multinic
echo "setup: ready (venv: $venv)"
