//go:build tools

// Pins what scripts/k8s-dev.sh builds: KWOK.
package kwokdev

import _ "sigs.k8s.io/kwok/cmd/kwok"
