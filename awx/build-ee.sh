#!/usr/bin/env bash
# Build the execution environment's context (and the image, when podman or docker is present).
#   bash awx/build-ee.sh            # context only: .cache/ee/context
#   bash awx/build-ee.sh --image    # also ansible-builder build (needs podman/docker and registry access)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PATH="$here/.venv/bin:$PATH"
out="$here/.cache/ee"
mkdir -p "$out"
tree=$(bash scripts/collection-tree.sh "$out/src")
rm -f "$out"/netscale-multinic*.tar.gz
ansible-galaxy collection build "$tree" --output-path "$out" >/dev/null
mv "$out"/netscale-multinic-*.tar.gz "$out/netscale-multinic.tar.gz"
rm -rf "$out/context" "$out/src"
ansible-builder create -f execution-environment.yml -c "$out/context" --output-filename Containerfile >/dev/null
echo "ee context: $out/context ($(ls "$out/context" | tr '\n' ' '))"
if [ "${1:-}" = "--image" ]; then
  ansible-builder build -f execution-environment.yml -c "$out/context" -t "netscale-multinic-ee:$(awk '/^version:/{print $2}' galaxy.yml)"
fi
