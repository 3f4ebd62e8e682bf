#!/usr/bin/env bash
# The static checks of scripts/test.sh (run after scripts/setup.sh, from there): ansible-doc of every plugin,
# ansible-lint (production profile), ansible-test sanity, collection build + galaxy-importer + install.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PATH="$here/.venv/bin:$PATH"
step() { printf '\n=== %s\n' "$*"; }

step "ansible-doc for every plugin"
bash scripts/check-docs.sh

step "ansible-lint (production profile)"
ansible-lint --profile production --offline -q

step "ansible-test sanity"
tree=$(bash scripts/collection-tree.sh "${TMPDIR:-/tmp}/netscale-multinic-sanity")
(cd "$tree" && PATH="$here/.cache/sanity-venv/bin:$PATH" ansible-test sanity --python 3.11 --requirements --color no \
   2>&1 | grep -v '^WARNING: Location' | grep -Ev '^(Looking in|Collecting|Downloading|Installing|Successfully|Processing|  Attempting|    Found|    Uninstalling|      Successfully|     ━)')
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "ansible-test sanity failed ($rc)"; exit "$rc"; }

step "collection build, galaxy-importer and install"
bash scripts/check-build.sh
