#!/usr/bin/env bash
# The Helm chart (deploy/helm/shoal): helm lint passes; what `helm template`
# renders is accepted by a real API server (kubectl apply --dry-run=server
# on the dev cluster) in a namespace that enforces Pod Security
# "restricted", without a warning; a missing cluster name is refused;
# nothing in it grants a verb on Secrets; the image is the chart's
# appVersion; the agent binds every address and advertises the Service's
# name. tests/k8s_real_node_test.sh installs it for real. The ServiceAccount's rights are checked
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
kubectl label namespace shoal-system pod-security.kubernetes.io/enforce=restricted \
  pod-security.kubernetes.io/warn=restricted >/dev/null
kubectl create namespace batch >/dev/null
out=$(kubectl apply --dry-run=server -f "$work/all.yaml" 2>&1) || { echo "$out"; fail "the API server refused the chart"; }
echo "$out"
for kind in serviceaccount/shoal clusterrole.rbac.authorization.k8s.io/shoal-reader \
            role.rbac.authorization.k8s.io/shoal-workloads configmap/shoal-cluster service/shoal \
            service/shoal-metrics statefulset.apps/shoal; do
  grep -q "^$kind created (server dry run)" <<<"$out" || fail "$kind was not accepted"
done
[ "$(grep -c "^role.rbac.authorization.k8s.io/shoal-workloads created" <<<"$out")" = 2 ] ||
  fail "expected a Role in each of the two workload namespaces"
if grep -qi "PodSecurity" <<<"$out"; then fail "the chart's pod does not pass Pod Security restricted"; fi
python3 - "$work/all.yaml" "$chart/Chart.yaml" <<'PY' || fail "the rendered StatefulSet or Services"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
app_version = yaml.safe_load(open(sys.argv[2]))["appVersion"]
pod = next(d for d in docs if d["kind"] == "StatefulSet")["spec"]["template"]["spec"]
container = pod["containers"][0]
assert container["image"] == f"shoal:{app_version}", container["image"]
assert pod["securityContext"]["runAsUser"] == 10001 and pod["securityContext"]["runAsNonRoot"], pod["securityContext"]
env = {e["name"]: e["value"] for e in container["env"]}
assert env["SHOAL_LISTEN"] == "tcp://*:7400", env
assert env["SHOAL_ADVERTISE"] == "tcp://shoal.shoal-system.svc:7400", env
assert env["SHOAL_DATA"] == "/var/lib/shoal/agent", env
services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
assert [p["name"] for p in services["shoal"]["spec"]["ports"]] == ["peer"], services["shoal"]
assert services["shoal-metrics"]["spec"]["type"] == "ClusterIP", services["shoal-metrics"]
PY
# A changed Cluster manifest rolls the pod: its checksum is in the template.
checksum() {
  "$bin/helm" template shoal "$chart" --namespace shoal-system --set cluster=east,org=acme "$@" |
    grep "shoal.dev/cluster-config-checksum"
}
[ "$(checksum)" != "$(checksum --set podImage=busybox:1.37)" ] || fail "a changed Cluster manifest does not change the pod template"
echo "ok: lint, rendered objects accepted by kube-apiserver under Pod Security restricted, no rights on secrets"
