#!/usr/bin/env bash
# Builds the agent's container image without Docker or a registry, for the
# dev cluster's real node (scripts/k8s-dev.sh load-images DIR --image OUT):
#
#   scripts/k8s-images.sh OUT.tar [TAG]
#
# The image holds the files of the project's Debian package
# (scripts/package.sh, from the build tree: build/ or $SHOAL_BUILD_DIR), the
# shared libraries its programs link from this Debian 12 machine (what the
# package's Depends install), busybox as /bin/sh for the entrypoint, and
# the user shoal (10001:10001) owning /var/lib/shoal. It starts docker/entrypoint.sh, as
# the Dockerfile's image does. TAG defaults to shoal:<the chart's appVersion>,
# the tag the Helm chart runs. Prints OUT.tar.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
fail() { echo "k8s-images: $*" >&2; exit 1; }
[ $# -ge 1 ] && [ $# -le 2 ] || fail "usage: scripts/k8s-images.sh OUT.tar [TAG]"
out=$1
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/deploy/helm/shoal/Chart.yaml")
tag=${2:-shoal:$app_version}
for tool in dpkg-deb ldd busybox python3; do
  command -v "$tool" >/dev/null || fail "$tool is missing"
done
deb=$(bash "$ROOT/scripts/package.sh" | tail -n 1)
[ -f "$deb" ] || fail "scripts/package.sh made no package"

root=$(mktemp -d /tmp/shoal-image.XXXXXX)
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
# The libraries each program loads, at the paths the loader looks for them.
binaries=("$root/usr/bin/shoald" "$root/usr/bin/shoalctl" "$root/usr/lib/shoal/shoal-exec-monitor")
for binary in "${binaries[@]}"; do
  [ -x "$binary" ] || fail "the package has no ${binary#"$root"}"
  ldd "$binary" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'
done | sort -u | while read -r library; do
  cp -L --parents "$library" "$root"
done
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/usr/local/bin" "$root/var/lib/shoal"
cp "$(command -v busybox)" "$root/bin/busybox"
for applet in sh hostname sed cat ls id env; do ln -sf busybox "$root/bin/$applet"; done
cp "$ROOT/docker/entrypoint.sh" "$root/usr/local/bin/shoal-entrypoint"
chmod 0755 "$root/usr/local/bin/shoal-entrypoint"
printf 'root:x:0:0:root:/root:/bin/sh\nshoal:x:10001:10001:shoal agent:/var/lib/shoal:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nshoal:x:10001:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"
chown 10001:10001 "$root/var/lib/shoal"
chmod 0700 "$root/var/lib/shoal"
python3 "$ROOT/scripts/k8s-dev/image-archive.py" "$root" "$out" --tag "$tag" \
  --entrypoint '["/usr/local/bin/shoal-entrypoint"]' --env SHOAL_DATA=/var/lib/shoal/agent --user 10001:10001
