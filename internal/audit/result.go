package audit

import (
	"fmt"
	"strconv"
)

// Outcome is the verdict on one binding.
type Outcome string

const (
	// Verified means the manifest at the recorded commit renders the recorded
	// decision, and the binding's digest matches its own fields.
	Verified Outcome = "Verified"
	// Mismatch means the rendered decision differs from the recorded one, or
	// the binding's digest or key does not match its own fields.
	Mismatch Outcome = "Mismatch"
	// Unverifiable means the recorded decision could not be compared with a
	// rendered one; Result.Reason says why.
	Unverifiable Outcome = "Unverifiable"
)

// Result is the audit of one binding, ready to print as a table row, JSON
// or YAML.
type Result struct {
	// Binding is "<namespace>/<name>".
	Binding string `json:"binding"`
	// Result is the verdict.
	Result Outcome `json:"result"`
	// Attestation says who vouches for the recorded revision: a GitOps
	// tool's status, or only an annotation.
	Attestation Attestation `json:"attestation"`
	// AttestedBy names the GitOps object whose status gave the revision,
	// "Kustomization flux-system/apps", when Attested.
	AttestedBy string `json:"attestedBy,omitempty"`
	// Reason says why a binding is Unverifiable, or why a Mismatch found in
	// the binding alone could not be compared with the manifest, or for a
	// Verified binding why its origin commit is uncertain.
	Reason string `json:"reason,omitempty"`
	// Repository and Path are where the manifest was rendered from.
	Repository string `json:"repository,omitempty"`
	// Path is the rendered directory inside the repository.
	Path string `json:"path,omitempty"`
	// Server is "<namespace>/<name>" of the rendered EmbeddingServer.
	Server string `json:"server,omitempty"`
	// RecordedCommit is the commit the binding names.
	RecordedCommit string `json:"recordedCommit,omitempty"`
	// Artifact is the digest of the OCI artifact the binding was applied
	// from; RecordedCommit and Repository are then its git origin.
	Artifact string `json:"artifact,omitempty"`
	// OriginCommit is the oldest commit of the unbroken first-parent run,
	// ending at the recorded commit, that renders the same decision digest.
	// Set when Verified.
	OriginCommit string `json:"originCommit,omitempty"`
	// OriginAuthor is the origin commit's author, "Name <email>".
	OriginAuthor string `json:"originAuthor,omitempty"`
	// OriginDate is the origin commit's author date, RFC 3339.
	OriginDate string `json:"originDate,omitempty"`
	// OriginSubject is the first line of the origin commit's message.
	OriginSubject string `json:"originSubject,omitempty"`
	// StorageOriginCommit is the oldest commit of the unbroken first-parent
	// run, ending at the recorded commit, whose decisions share the
	// recorded one's storage: where the cached data was decided. A change
	// of retainFor alone moves OriginCommit, not this; nor does a larger
	// size or a new revision when the binding took over the claims of the
	// binding it superseded. Set when Verified.
	StorageOriginCommit string `json:"storageOriginCommit,omitempty"`
	// Differences are the fields found different, when a Mismatch.
	Differences []Difference `json:"differences,omitempty"`
	// CommitsWalked counts the commits whose decision was evaluated.
	CommitsWalked int `json:"commitsWalked,omitempty"`
	// Renders counts the kustomize builds run for this binding; commits whose
	// rendered inputs were unchanged reuse an earlier build.
	Renders int `json:"renders,omitempty"`
	// Claims say how each claim of the binding was filled: from the hub,
	// or as a clone of which claim at which commit.
	Claims []ClaimProvenance `json:"claims,omitempty"`
}

// Difference is one field whose recorded value is not what it should be.
type Difference struct {
	// Field is the path in the binding's spec, e.g. "decision.size".
	Field string `json:"field"`
	// Recorded is the binding's value.
	Recorded string `json:"recorded"`
	// Rendered is the value decided from the manifest; empty when nothing
	// could be rendered (see Result.Reason) or when the value is empty.
	Rendered string `json:"rendered"`
	// Recomputed is the digest or key computed from the binding's own
	// fields, set only when it differs from the recorded one.
	Recomputed string `json:"recomputed,omitempty"`
}

// String reads "decision.size: recorded 20Gi, rendered 10Gi".
func (d Difference) String() string {
	s := fmt.Sprintf("%s: recorded %s", d.Field, shown(d.Recorded))
	if d.Rendered != "" || d.Recomputed == "" {
		s += ", rendered " + shown(d.Rendered)
	}
	if d.Recomputed != "" {
		s += ", recomputed from the recorded fields " + d.Recomputed
	}
	return s
}

// shown quotes an empty value so it is visible.
func shown(value string) string {
	if value == "" {
		return strconv.Quote(value)
	}
	return value
}

// AnyMismatch reports whether any result is a Mismatch, the case in which
// `embedops audit` exits non-zero.
func AnyMismatch(results []Result) bool {
	for _, r := range results {
		if r.Result == Mismatch {
			return true
		}
	}
	return false
}
