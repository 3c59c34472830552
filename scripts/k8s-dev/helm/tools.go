//go:build tools

// Pins what scripts/k8s-dev.sh builds: helm.
package helmdev

import _ "helm.sh/helm/v3/cmd/helm"
