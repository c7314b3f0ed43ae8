// Command krew packages the CLI as the kubectl plugin embedops for krew,
// kubectl's plugin manager: one archive per platform holding
// kubectl-embedops, and the Plugin manifest krew installs from (krew
// apiVersion krew.googlecontainertools.github.com/v1alpha2), each
// platform's uri and sha256 filled in.
//
//	go run ./test/krew -o bin/krew -version v0.3.0 -uri-base <where the archives are published>
//
// Without -uri-base the uris are file:// paths of the archives, so `kubectl
// krew install --manifest bin/krew/embedops.yaml` installs from this
// machine.
package main
