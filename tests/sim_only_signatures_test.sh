#!/usr/bin/env bash
# Simulated signatures (crypto::set_simulated_signatures) are forgeable by
# anyone: only the federation simulator (tests/sim) may turn them on. Fails
# if any other source file calls the switch.
set -euo pipefail
root="$1"
if hits=$(grep -rn --include='*.cc' --include='*.h' 'set_simulated_signatures(' "$root" \
    | grep -v -e "^$root/tests/sim/" -e "^$root/crypto/identity\.\(h\|cc\):" -e "^$root/build"); then
  echo "simulated signatures turned on outside tests/sim:"; echo "$hits"; exit 1
fi
echo "only tests/sim turns simulated signatures on"
