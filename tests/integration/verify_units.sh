#!/bin/sh
# Checks the shipped systemd units with systemd-analyze verify, pointing
# ExecStart at the freshly built binaries (the units name /usr/local/bin).
# Usage: verify_units.sh SYSTEMD_ANALYZE UNIT_DIR TESSERAD TESSERA_AGENT
set -eu
analyze=$1 units=$2 tesserad=$3 agent=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s#/usr/local/bin/tesserad#$tesserad#" "$units/tesserad.service" > "$work/tesserad.service"
sed "s#/usr/local/bin/tessera-agent#$agent#" "$units/tessera-agent.service" > "$work/tessera-agent.service"
for required in Type=notify NoNewPrivileges=yes ProtectSystem=strict StateDirectory= Restart=on-failure User=tessera; do
  for unit in "$work"/*.service; do
    grep -q "^$required" "$unit" || { echo "$(basename "$unit") lacks $required"; exit 1; }
  done
done
out=$("$analyze" verify "$work/tesserad.service" "$work/tessera-agent.service" 2>&1) || {
  echo "$out"; exit 1; }
# verify prints problems as warnings without failing on some of them.
if echo "$out" | grep -v -E "Failed to open /dev/tty|getpwnam|tessera.*: No such" | grep -q .; then
  echo "$out"; exit 1
fi
echo "systemd units verified"
