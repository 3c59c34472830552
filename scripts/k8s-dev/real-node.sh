# The real node of scripts/k8s-dev.sh (`up DIR --real-node`), sourced by it:
# one kubelet with containerd, runc and the CNI bridge, kube-proxy,
# kube-scheduler and kube-controller-manager beside the API server.
#
# The network rule: this host's own network namespace keeps loopback only.
# Everything of the cluster, control plane included, runs in a network
# namespace of its own (the "test host", shoal-k8s-<hash of DIR>) that
# holds the node's address (NODE_IP, on a veth pair whose both ends stay
# inside), the pods' bridge and kube-proxy's rules; it has no route out, and
# nothing is forwarded or masqueraded to this host. Processes enter only
# that namespace's network (nsenter --net), in the mount namespace `up` ran
# in (containerd's, even when `node` or `down` run under `ip netns exec`,
# whose private mounts hide /sys/fs/cgroup), so that the volumes the
# kubelet mounts are the ones runc sees.
#
# The kubelet writes a few paths it does not let one move
# (/var/lib/kubelet/device-plugins, /var/log/containers) and the kubepods
# cgroups; containerd's shims keep sockets under /run/containerd. So one
# real node runs per machine at a time ($REAL_NODE_MARKER names its DIR),
# and `down` removes those paths if `up` made them, with every mount under
# DIR, the cgroups and the namespace.

NODE_NAME=shoal-node
NODE_IP=10.88.0.1
POD_RANGE=10.244.0.0/24
POD_GATEWAY=10.244.0.1
SERVICE_RANGE=10.96.0.0/24
SERVICE_IP=10.96.0.1
REAL_NODE_MARKER=/run/shoal-k8s-real-node
# The images every pod of the node may use without a registry.
PAUSE_IMAGE=registry.k8s.io/pause:3.10
BUSYBOX_IMAGE=busybox:1.36

# Runs "$@" in the mount namespace the node's containerd runs in (where
# `up` ran), or here before it starts.
in_node_mounts() {
  local pid
  pid=$(cat "$DIR/run/containerd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    nsenter "--mount=/proc/$pid/ns/mnt" "$@"
  else
    "$@"
  fi
}
# Sets NODE_PREFIX to what runs a command in the test host: its network,
# containerd's mounts; empty without a real node.
node_prefix() {
  NODE_PREFIX=()
  [ -e "$DIR/run/netns" ] || return 0
  NODE_PREFIX=(nsenter "--net=/run/netns/$(cat "$DIR/run/netns")")
  local pid
  pid=$(cat "$DIR/run/containerd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    NODE_PREFIX=(nsenter "--mount=/proc/$pid/ns/mnt" "--net=/run/netns/$(cat "$DIR/run/netns")")
  fi
}
in_node() {
  node_prefix
  "${NODE_PREFIX[@]}" "$@"
}

real_node_prepare() {
  [ "$(id -u)" = 0 ] || fail "--real-node: needs root (network namespaces, containerd, cgroups)"
  local tool
  for tool in ip nsenter containerd containerd-shim-runc-v2 ctr runc iptables-restore busybox; do
    command -v "$tool" >/dev/null || fail "--real-node: $tool is missing (scripts/install-deps.sh installs it)"
  done
  if [ -e "$REAL_NODE_MARKER" ]; then
    local other
    other=$(cat "$REAL_NODE_MARKER")
    if alive "$(cat "$other/run/kubelet.pid" 2>/dev/null || true)" || [ -e "$other/run/netns" ]; then
      fail "--real-node: $other runs this machine's real node (one at a time: scripts/k8s-dev.sh down $other)"
    fi
  fi
  echo "$DIR" >"$REAL_NODE_MARKER"
  # Paths outside DIR the node writes: `down` removes those `up` made.
  : >"$DIR/run/made-paths"
  local path
  for path in /var/lib/kubelet /var/log/containers /run/containerd; do
    [ -e "$path" ] || echo "$path" >>"$DIR/run/made-paths"
  done
  local netns
  netns="shoal-k8s-$(echo -n "$DIR" | sha256sum | cut -c1-8)"
  in_node_mounts ip netns del "$netns" 2>/dev/null || true
  in_node_mounts ip netns add "$netns"
  echo "$netns" >"$DIR/run/netns"
  ip -n "$netns" link set lo up
  ip -n "$netns" link add node0 type veth peer name node0-end
  ip -n "$netns" addr add "$NODE_IP/24" dev node0
  ip -n "$netns" link set node0-end up
  ip -n "$netns" link set node0 up
  # The test host's own connections to a Service's address need a route
  # for kube-proxy's rules to rewrite (a node's default route, elsewhere);
  # it ends at node0's other end, in the same namespace.
  ip -n "$netns" route add "$SERVICE_RANGE" dev node0
}

real_node_start() {
  local bin=$1 kubeconfig=$2 api_port=$3 pki="$DIR/pki"
  rm -rf "$DIR/node"
  mkdir -p "$DIR/node/cni/net.d" "$DIR/node/cni/ipam" "$DIR/node/containerd" "$DIR/node/kubelet" \
    "$DIR/node/pod-logs" "$DIR/node/volume-plugins" "$DIR/node/controller-flex" "$DIR/node/images"
  local node="$DIR/node"

  # The control plane's other half: service accounts and their tokens, the
  # node lifecycle (taints, evictions), volume binding; the scheduler.
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$kubeconfig" \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --leader-elect=false --secure-port 0 --use-service-account-credentials=false \
    --flex-volume-plugin-dir "$node/controller-flex" --node-monitor-grace-period 16s \
    --controllers '*,-bootstrapsigner,-tokencleaner,-csrsigning,-csrapproving,-csrcleaner' --v=1
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$kubeconfig" --leader-elect=false --secure-port 0 --v=1

  # The pod network: one bridge in the test host, addresses from POD_RANGE,
  # the bridge the pods' gateway. Written before containerd starts.
  cat >"$node/cni/net.d/10-shoal-dev.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "shoal-dev",
  "plugins": [{
    "type": "bridge", "bridge": "shoal-cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": "$node/cni/ipam",
             "ranges": [[{"subnet": "$POD_RANGE", "gateway": "$POD_GATEWAY"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
EOF
  # runc cannot set the pause container's oom_score_adj without
  # CAP_SYS_RESOURCE, which a sandbox's root may lack: restrict_oom_score_adj.
  cat >"$node/containerd/config.toml" <<EOF
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$node/containerd/containerd.sock"
[ttrpc]
  address = "$node/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$bin/cni"
    conf_dir = "$node/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$node/runc"
EOF
  start containerd containerd --config "$node/containerd/config.toml" --log-level warn
  await 30 containerd "$DIR/log/containerd.log" ctr --address "$node/containerd/containerd.sock" version
  local pause busybox
  pause=$(image_archive pause) && busybox=$(image_archive busybox) || fail "making the node's images failed"
  real_node_import "$pause" "$busybox"

  # The kubelet: its serving certificate names the node's address (the API
  # server checks it), its client certificate makes it the node.
  issue kubelet "/CN=$NODE_NAME" "subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME\nextendedKeyUsage=serverAuth"
  issue kubelet-node "/CN=system:node:$NODE_NAME/O=system:nodes" "extendedKeyUsage=clientAuth"
  cat >"$node/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$pki/ca.crt"}
users:
- name: node
  user: {client-certificate: "$pki/kubelet-node.crt", client-key: "$pki/kubelet-node.key"}
contexts:
- name: dev
  context: {cluster: dev, user: node}
current-context: dev
EOF
  # No nameserver: the test host resolves nothing beyond its hosts file.
  echo "options ndots:1" >"$node/resolv.conf"
  cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$node/containerd/containerd.sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
resolvConf: $node/resolv.conf
clusterDomain: cluster.local
podLogsDir: $node/pod-logs
volumePluginDir: $node/volume-plugins
nodeStatusUpdateFrequency: 4s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
serializeImagePulls: false
maxPods: 110
staticPodPath: $node/manifests
EOF
  mkdir -p "$node/manifests"
  start_kubelet "$bin"

  # Services: kube-proxy's rules, in the test host only.
  cat >"$node/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $kubeconfig}
mode: iptables
clusterCIDR: $POD_RANGE
hostnameOverride: $NODE_NAME
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF
  start kube-proxy "$bin/kube-proxy" --config "$node/kube-proxy.yaml" --v=1

  # Ready: the node reports Ready and carries no taint, and the default
  # namespace has the account every pod runs as.
  node_ready() {
    local state
    state=$(in_node "$bin/kubectl" --kubeconfig "$kubeconfig" get node "$NODE_NAME" \
      -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints}')
    [ "$state" = "True " ] && in_node "$bin/kubectl" --kubeconfig "$kubeconfig" get serviceaccount default
  }
  await 60 "the real node $NODE_NAME" "$DIR/log/kubelet.log" node_ready
  echo "k8s-dev: the real node $NODE_NAME ($NODE_IP) is Ready; run commands beside it with" \
    "scripts/k8s-dev.sh exec $DIR -- COMMAND" >&2
}

start_kubelet() {
  local bin=$1 node="$DIR/node"
  start kubelet "$bin/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$node/kubelet.kubeconfig" \
    --root-dir "$node/kubelet" --node-ip "$NODE_IP" --hostname-override "$NODE_NAME" \
    --node-labels "type=real" --v=1
}

# `node DIR stop|start`: the kubelet alone, as a node lost and back (its
# containers keep running meanwhile, as on a node cut off from the cluster).
real_node_kubelet() {
  [ -e "$DIR/run/netns" ] || fail "node: $DIR runs no real node"
  local pid
  pid=$(cat "$DIR/run/kubelet.pid" 2>/dev/null || true)
  case "$1" in
    stop)
      alive "$pid" || fail "node stop: the kubelet is not running"
      kill -KILL "$pid"
      while alive "$pid"; do sleep 0.1; done
      ;;
    start)
      alive "$pid" && fail "node start: the kubelet runs already"
      mv "$DIR/log/kubelet.log" "$DIR/log/kubelet.log.1"
      start_kubelet "$(bin_dir)"
      ;;
    *) fail "node: expected stop or start, got '$1'" ;;
  esac
}

# Prints the path of the archive of the node's image NAME (pause, busybox),
# made from what this machine has.
image_archive() {
  local name=$1
  local root="$DIR/node/images/$name" out="$DIR/node/images/$name.tar"
  rm -rf "$root"
  mkdir -p "$root"
  case "$name" in
    pause)
      cp "$(bin_dir)/pause" "$root/pause"
      python3 "$PINS/image-archive.py" "$root" "$out" --tag "$PAUSE_IMAGE" --entrypoint '["/pause"]' \
        --user 65535:65535 >/dev/null
      ;;
    busybox)
      mkdir -p "$root/bin" "$root/etc" "$root/tmp"
      chmod 1777 "$root/tmp"
      cp "$(command -v busybox)" "$root/bin/busybox"
      local applet
      for applet in $(busybox --list); do
        [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
      done
      printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
      printf 'root:x:0:\nnobody:x:65534:\n' >"$root/etc/group"
      python3 "$PINS/image-archive.py" "$root" "$out" --tag "$BUSYBOX_IMAGE" --cmd '["sh"]' >/dev/null
      ;;
  esac
  echo "$out"
}

# Imports image archives (docker-archive tarballs) into the node's containerd.
real_node_import() {
  local archive
  for archive in "$@"; do
    [ -f "$archive" ] || fail "load-images: $archive: no such archive"
    in_node ctr --address "$DIR/node/containerd/containerd.sock" -n k8s.io images import \
      --snapshotter overlayfs "$archive" >>"$DIR/log/images.log" 2>&1 ||
      fail "importing $archive into the node failed (log: $DIR/log/images.log)"
  done
}

real_node_load_images() {
  [ -e "$DIR/run/netns" ] || fail "load-images: $DIR runs no real node"
  [ $# -ge 1 ] || fail "load-images: expected --image ARCHIVE.tar"
  real_node_import "$@"
}

# Stops what the node left running and removes what it made (after the
# kubelet and the control plane are stopped).
real_node_down() {
  local netns pid cgroup
  netns=$(cat "$DIR/run/netns")
  # The pods' processes, by their cgroups; then the shims; then containerd.
  for cgroup in /sys/fs/cgroup/*/kubepods; do
    [ -d "$cgroup" ] || continue
    find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $DIR/node/containerd/containerd.sock" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Mounts under DIR (volumes, rootfs overlays, pods' namespaces), deepest
  # first, in containerd's mount namespace (where they were made).
  local mount mounts=/proc/self/mountinfo
  pid=$(cat "$DIR/run/containerd.pid" 2>/dev/null || true)
  if alive "$pid"; then mounts=/proc/$pid/mountinfo; fi
  for mount in $(awk -v dir="$DIR/" 'index($5, dir) == 1 {print $5}' "$mounts" | sort -r); do
    in_node_mounts umount -l "$(printf '%b' "$mount")" 2>/dev/null || true
  done
  if alive "$pid"; then
    kill -TERM "$pid"
    local deadline=$((SECONDS + 10))
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  fi
  for cgroup in /sys/fs/cgroup/*/kubepods; do
    [ -d "$cgroup" ] || continue
    find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  in_node_mounts ip netns del "$netns" 2>/dev/null || true
  rm -rf "/etc/netns/$netns"
  if [ -f "$DIR/run/made-paths" ]; then
    local path
    while read -r path; do rm -rf "$path"; done <"$DIR/run/made-paths"
    rm -f "$DIR/run/made-paths"
  fi
  [ "$(cat "$REAL_NODE_MARKER" 2>/dev/null)" = "$DIR" ] && rm -f "$REAL_NODE_MARKER"
  rm -f "$DIR/run/netns"
}
