module k8s.io/sample-cli-plugin

go 1.24
