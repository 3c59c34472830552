//go:build tools

// Pins what scripts/k8s-dev.sh builds: etcd.
package etcddev

import _ "go.etcd.io/etcd/server/v3/etcdmain"
