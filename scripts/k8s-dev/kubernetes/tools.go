//go:build tools

// Pins what scripts/k8s-dev.sh builds: kube-apiserver and kubectl.
package k8sdev

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubectl/pkg/cmd"
)
