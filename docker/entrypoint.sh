#!/bin/sh
# The container's entrypoint: `shoald run` on the data volume, after
# `shoald init` on first start (no agent.yaml yet) from the environment:
#   SHOAL_CLUSTER, SHOAL_ORG    required on first start
#   SHOAL_LISTEN                default tcp://<hostname>:7400 (peers dial it)
#   SHOAL_CLUSTER_CONFIG        a Cluster manifest (mounted); default: sim nodes
#   SHOAL_IDENTITY_FILE         an identity key to keep (a mounted Secret); default: a new one
#   SHOAL_METRICS_LISTEN        e.g. 0.0.0.0:9400 (off by default)
#   SHOAL_LOG_FORMAT            text | json (default json in a container)
#   SHOAL_LOG_LEVEL             default info
#   SHOAL_DATA                  default /var/lib/shoal; SHOAL_BIN default /usr/bin
# Later starts reuse what the volume holds; the variables are not read again.
set -eu
DATA="${SHOAL_DATA:-/var/lib/shoal}"
BIN="${SHOAL_BIN:-/usr/bin}"
if [ ! -f "$DATA/agent.yaml" ]; then
  : "${SHOAL_CLUSTER:?SHOAL_CLUSTER: set it to this cluster's name on first start}"
  : "${SHOAL_ORG:?SHOAL_ORG: set it to the organization's name on first start}"
  listen="${SHOAL_LISTEN:-tcp://$(hostname):7400}"
  set -- --data "$DATA" --cluster "$SHOAL_CLUSTER" --org "$SHOAL_ORG" --listen "$listen"
  if [ -n "${SHOAL_CLUSTER_CONFIG:-}" ]; then set -- "$@" --cluster-config "$SHOAL_CLUSTER_CONFIG"; fi
  if [ -n "${SHOAL_IDENTITY_FILE:-}" ]; then set -- "$@" --identity "$SHOAL_IDENTITY_FILE"; fi
  "$BIN/shoald" init "$@"
  set_field() { sed -i "s|^$1: .*|$1: $2|" "$DATA/agent.yaml"; }
  set_field logFormat "${SHOAL_LOG_FORMAT:-json}"
  if [ -n "${SHOAL_METRICS_LISTEN:-}" ]; then set_field metricsListen "$SHOAL_METRICS_LISTEN"; fi
fi
exec "$BIN/shoald" run --data "$DATA" --log-level "${SHOAL_LOG_LEVEL:-info}"
