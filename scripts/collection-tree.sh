#!/usr/bin/env bash
# Copy the collection (files git tracks or would track) into DEST/ansible_collections/netscale/multinic,
# the layout ansible-test and ansible-galaxy need; prints that path.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:?usage: collection-tree.sh DEST}
tree="$dest/ansible_collections/netscale/multinic"
rm -rf "$tree"
mkdir -p "$tree"
cd "$here"
git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- ./ "$tree/"
# ansible-test lists content through git: give the copy its own repository.
git -C "$tree" init -q
git -C "$tree" add -A
echo "$tree"
