#!/bin/sh
# The container's entrypoint: `shoald init` on first start (no agent.yaml
# yet), then at every start `shoald configure` with the settings the
# environment gives (so a changed Helm value or compose variable takes
# effect when the container starts again), then `shoald run`:
#   SHOAL_CLUSTER, SHOAL_ORG    required on first start; later, must match
#   SHOAL_LISTEN                what the peer socket binds (default tcp://*:7400)
#   SHOAL_ADVERTISE             what peers dial (default tcp://<hostname>:7400):
#                               a Service's, load balancer's or host's name
#   SHOAL_CLUSTER_CONFIG        a Cluster manifest (mounted); default: sim nodes
#   SHOAL_IDENTITY_FILE         an identity key to keep (a mounted Secret), read
#                               on first start only; default: a new one
#   SHOAL_METRICS_LISTEN        e.g. 0.0.0.0:9400 (off by default)
#   SHOAL_LOG_FORMAT            text | json (default json in a container)
#   SHOAL_LOG_LEVEL             default info
#   SHOAL_DATA                  default /var/lib/shoal/agent: a directory of the
#                               agent's own inside the volume (the volume's root
#                               may belong to root, and shoald wants 0700)
#   SHOAL_BIN                   default /usr/bin
set -eu
DATA="${SHOAL_DATA:-/var/lib/shoal/agent}"
BIN="${SHOAL_BIN:-/usr/bin}"
if [ ! -f "$DATA/agent.yaml" ]; then
  : "${SHOAL_CLUSTER:?SHOAL_CLUSTER: set it to this cluster's name on first start}"
  : "${SHOAL_ORG:?SHOAL_ORG: set it to the organization's name on first start}"
  set -- --data "$DATA" --cluster "$SHOAL_CLUSTER" --org "$SHOAL_ORG" \
    --listen "${SHOAL_LISTEN:-tcp://*:7400}" --advertise "${SHOAL_ADVERTISE:-tcp://$(hostname):7400}"
  if [ -n "${SHOAL_IDENTITY_FILE:-}" ]; then set -- "$@" --identity "$SHOAL_IDENTITY_FILE"; fi
  "$BIN/shoald" init "$@"
fi
set -- --data "$DATA" --log-format "${SHOAL_LOG_FORMAT:-json}"
if [ -n "${SHOAL_CLUSTER:-}" ]; then set -- "$@" --cluster "$SHOAL_CLUSTER"; fi
if [ -n "${SHOAL_ORG:-}" ]; then set -- "$@" --org "$SHOAL_ORG"; fi
if [ -n "${SHOAL_LISTEN:-}" ]; then set -- "$@" --listen "$SHOAL_LISTEN"; fi
if [ -n "${SHOAL_ADVERTISE:-}" ]; then set -- "$@" --advertise "$SHOAL_ADVERTISE"; fi
if [ -n "${SHOAL_CLUSTER_CONFIG+set}" ]; then set -- "$@" --cluster-config "$SHOAL_CLUSTER_CONFIG"; fi
if [ -n "${SHOAL_METRICS_LISTEN+set}" ]; then set -- "$@" --metrics-listen "$SHOAL_METRICS_LISTEN"; fi
"$BIN/shoald" configure "$@"
exec "$BIN/shoald" run --data "$DATA" --log-level "${SHOAL_LOG_LEVEL:-info}"
