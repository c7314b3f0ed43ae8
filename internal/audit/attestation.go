package audit

import (
	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Attestation says who vouches for a binding's recorded revision.
type Attestation string

const (
	// Attested means the revision was read from the status of the GitOps
	// object that applied the server: a Flux Kustomization's
	// status.lastAttemptedRevision, an Argo CD Application's sync result.
	// The tool says it applied that commit.
	Attested Attestation = "Attested"
	// Declared means the revision comes from the server's
	// embedops.dev/source-* annotations: whoever wrote the server says so.
	// A Verified declared binding means "the named commit renders this
	// decision", not "a GitOps tool applied it from there".
	Declared Attestation = "Declared"
	// Unattested means no revision was recorded, or the binding names no
	// GitOps object for it.
	Unattested Attestation = "Unattested"
)

// attestationOf says who vouches for the source's revision and, when a
// GitOps tool does, names its object.
func attestationOf(source embedopsv1.DecisionSource) (Attestation, string) {
	switch source.Method {
	case embedopsv1.SourceDeclared:
		return Declared, ""
	case embedopsv1.SourceFlux, embedopsv1.SourceArgoCD:
		if ref := source.ObjectRef; ref != nil && source.Revision != "" {
			return Attested, ref.Kind + " " + ref.Namespace + "/" + ref.Name
		}
	}
	return Unattested, ""
}

// NotAttested are the results whose revision no GitOps tool vouches for:
// Declared or Unattested. `embedops audit --require-attested` fails on
// any.
func NotAttested(results []Result) []Result {
	var found []Result
	for _, r := range results {
		if r.Attestation != Attested {
			found = append(found, r)
		}
	}
	return found
}
