#!/usr/bin/env bash
# The Helm chart (deploy/helm/shoal): helm lint passes; what `helm template`
# renders is accepted by a real API server (kubectl apply --dry-run=server
# on the dev cluster); a missing cluster name is refused; nothing in it
# grants a verb on Secrets. The ServiceAccount's rights are checked
# against the backend's needs in tests/integration/kube_backend_test.cc.
# Skipped (77) when the dev cluster is not built, failed under CI=true.
# Usage: helm_chart_test.sh SOURCE_DIR
set -euo pipefail
source_dir="$1"
dev="$source_dir/scripts/k8s-dev.sh"
chart="$source_dir/deploy/helm/shoal"
if ! bin=$("$dev" bin-dir 2>/dev/null); then
  echo "skipped: the test cluster is not built (scripts/k8s-dev.sh build)"
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
fi
work=$(mktemp -d /tmp/shoal-helm-test.XXXXXX)
trap '"$dev" down "$work/k" 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin/helm" lint "$chart" --set cluster=east,org=acme >"$work/lint.log" 2>&1 || { cat "$work/lint.log"; fail "helm lint"; }
if "$bin/helm" template t "$chart" --set org=acme >/dev/null 2>"$work/err"; then fail "a chart without cluster rendered"; fi
grep -q "cluster: this cluster's name" "$work/err" || fail "the missing value is not named: $(cat "$work/err")"

"$bin/helm" template shoal "$chart" --namespace shoal-system --set cluster=east,org=acme \
  --set identity.existingSecret=shoal-identity --set 'workloadNamespaces={default,batch}' >"$work/all.yaml"
grep -qi "secrets" <(grep -A3 "resources:" "$work/all.yaml") && fail "the chart grants something on secrets"
kubeconfig=$("$dev" up "$work/k" --nodes 1 | tail -n 1)
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
kubectl create namespace shoal-system >/dev/null
kubectl create namespace batch >/dev/null
out=$(kubectl apply --dry-run=server -f "$work/all.yaml" 2>&1) || { echo "$out"; fail "the API server refused the chart"; }
echo "$out"
for kind in serviceaccount/shoal clusterrole.rbac.authorization.k8s.io/shoal-reader \
            role.rbac.authorization.k8s.io/shoal-workloads configmap/shoal-cluster service/shoal statefulset.apps/shoal; do
  grep -q "^$kind created (server dry run)" <<<"$out" || fail "$kind was not accepted"
done
[ "$(grep -c "^role.rbac.authorization.k8s.io/shoal-workloads created" <<<"$out")" = 2 ] ||
  fail "expected a Role in each of the two workload namespaces"
echo "ok: lint, rendered objects accepted by kube-apiserver, no rights on secrets"
