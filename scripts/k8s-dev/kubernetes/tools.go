//go:build tools

// Pins what scripts/k8s-dev.sh builds: kube-apiserver and kubectl, and for
// the real node kubelet, kube-proxy, kube-scheduler and kube-controller-manager.
package k8sdev

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
