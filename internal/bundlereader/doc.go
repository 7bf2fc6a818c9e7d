// Package bundlereader turns the folders of a git checkout into Bundles: it finds bundle
// folders, reads their fleet.yaml, collects their files and resolves Helm charts, so that each
// Bundle is self-contained. `fleet apply` uses it; it needs no cluster.
package bundlereader
