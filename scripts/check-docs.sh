#!/usr/bin/env bash
# ansible-doc must render every module, filter and plugin of the collection.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
fail=0
count=0
for kind in modules:module inventory:inventory filter:filter callback:callback connection:connection lookup:lookup; do
  dir=plugins/${kind%%:*}
  type=${kind##*:}
  [ -d "$dir" ] || continue
  for f in "$dir"/*.py "$dir"/*.yml; do
    [ -e "$f" ] || continue
    name=$(basename "${f%.*}")
    [ "$name" = "__init__" ] && continue
    if [ "$type" = filter ] && [ "${f##*.}" = py ]; then continue; fi   # filters are documented in .yml
    count=$((count + 1))
    if ! out=$(ansible-doc -t "$type" "netscale.multinic.$name" 2>&1) || ! grep -q "netscale.multinic.$name" <<<"$out"; then
      echo "ansible-doc -t $type netscale.multinic.$name failed:"; echo "$out" | head -20; fail=1
    fi
  done
done
echo "ansible-doc: $count plugin docs checked"
exit $fail
