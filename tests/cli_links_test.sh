#!/usr/bin/env bash
# shoalctl speaks the control contract; it must not carry the agent core or
# SQLite. Checked on the built binary: no dynamic dependency on libsqlite3,
# and no symbol of shoal::core, shoal::store or shoal::runtime. A binary
# whose symbols cannot be read fails the check rather than passing it.
set -euo pipefail
shoalctl="$1"
libraries=$(ldd "$shoalctl")
if grep -q sqlite3 <<<"$libraries"; then
  echo "shoalctl links SQLite:"; grep sqlite3 <<<"$libraries"; exit 1
fi
symbols=$(nm -C "$shoalctl")
if ! grep -q 'shoal::' <<<"$symbols"; then
  echo "shoalctl: nm lists no shoal:: symbol, so nothing could be checked"; exit 1
fi
layers=$(grep -oE 'shoal::(core|store|runtime)::' <<<"$symbols" | sort -u) || [ $? -eq 1 ]
if [ -n "$layers" ]; then
  echo "shoalctl contains code of: $layers"; exit 1
fi
echo "shoalctl links neither SQLite nor the core, store or runtime"
