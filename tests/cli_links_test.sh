#!/usr/bin/env bash
# shoalctl speaks the control contract; it must not carry the agent core or
# SQLite (DESIGN.md §2, issue 13). Checked on the built binary: no dynamic
# dependency on libsqlite3, and no symbol of shoal::core, shoal::store or
# shoal::runtime.
set -euo pipefail
shoalctl="$1"
if ldd "$shoalctl" | grep -q sqlite3; then
  echo "shoalctl links SQLite:"; ldd "$shoalctl" | grep sqlite3; exit 1
fi
layers=$(nm -C "$shoalctl" | grep -oE 'shoal::(core|store|runtime)::' | sort -u || true)
if [ -n "$layers" ]; then
  echo "shoalctl contains code of: $layers"; exit 1
fi
echo "shoalctl links neither SQLite nor the core, store or runtime"
