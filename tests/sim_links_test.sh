#!/usr/bin/env bash
# The core is sans-I/O by linking, not only by its includes: the federation
# simulator, which runs the real core on in-memory stores and simulated
# clusters, must carry no database and no runner. Checked on the built
# binary: no dynamic dependency on libsqlite3 or libcurl, and no symbol of
# the SQLite store, the exec runner or its output files, or the slurm or
# kubernetes backend. A binary whose symbols cannot be read, or that shows
# no core, fails the check rather than passing it. Usage: sim_links_test.sh SHOAL_SIM
set -euo pipefail
binary="$1"
libraries=$(ldd "$binary")
if grep -qE 'libsqlite3|libcurl' <<<"$libraries"; then
  echo "$binary links a database or an HTTP client:"; grep -E 'libsqlite3|libcurl' <<<"$libraries"; exit 1
fi
symbols=$(nm -C "$binary")
if ! grep -q 'shoal::core::' <<<"$symbols"; then
  echo "$binary: nm lists no shoal::core:: symbol, so nothing could be checked"; exit 1
fi
io=$(grep -oE 'shoal::(store::sqlite|cluster::(kubernetes|slurm))::|shoal::cluster::(ExecRunner|read_log_file)' \
       <<<"$symbols" | sort -u) || [ $? -eq 1 ]
if [ -n "$io" ]; then
  echo "$binary contains I/O code: $io"; exit 1
fi
echo "$binary links the core with no database, HTTP client or runner"
