package audit

import (
	"errors"
	"fmt"
	"strings"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// errNoServer means no rendered EmbeddingServer can be the binding's.
var errNoServer = errors.New("no matching EmbeddingServer")

// match is the rendered server behind a binding and its decision.
type match struct {
	// server is "<namespace>/<name>".
	server string
	// decision is nil when the server says cache.mode None.
	decision *decision.Decision
}

// candidate is a rendered server that may be the binding's, with how well
// it fits: higher is better. The key and the digest cover the sharing
// domain, so a server matching either is in the binding's domain.
type candidate struct {
	match
	err   error
	score int
}

// Scores of a candidate.
const (
	scoreNamed    = 1 // named by the sharing domain or a request reference
	scoreKey      = 2 // decides the binding's identity key
	scoreDecision = 3 // decides the binding's digest
)

// matchServer picks the server a binding records the decision of: the one
// named by a PerReplica sharing domain ("<namespace>/<name>") or by a
// request reference, or, for a Shared domain ("<namespace>"), a server in
// that namespace whose identity key is the binding's. Among several, one
// deciding the recorded digest wins, then one with the recorded key, then
// the first. A fitting server whose spec cannot be decided is an error.
func matchServer(servers []*embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) (match, error) {
	named := namedServers(binding)
	var best *candidate
	for _, server := range servers {
		c := candidate{match: match{server: server.Namespace + "/" + server.Name}}
		c.decision, c.err = decision.For(server)
		switch {
		case c.err == nil && c.decision != nil && c.decision.Decision.Digest == binding.Spec.Decision.Digest:
			c.score = scoreDecision
		case c.err == nil && c.decision != nil && c.decision.Identity.Key == binding.Spec.Identity.Key:
			c.score = scoreKey
		case named[c.server]:
			c.score = scoreNamed
		}
		if c.score > 0 && (best == nil || c.score > best.score) {
			best = &c
		}
	}
	if best == nil {
		return match{}, fmt.Errorf("%w for sharing domain %q", errNoServer, binding.Spec.Identity.SharingDomain)
	}
	if best.err != nil {
		return match{}, fmt.Errorf("server %s: %w", best.server, best.err)
	}
	return best.match, nil
}

// namedServers are the "<namespace>/<name>" a binding names: its PerReplica
// sharing domain and its request references.
func namedServers(binding *embedopsv1.ModelCacheBinding) map[string]bool {
	named := map[string]bool{}
	if domain := binding.Spec.Identity.SharingDomain; strings.Contains(domain, "/") {
		named[domain] = true
	}
	for _, ref := range binding.Status.RequestReferences {
		if ref.Kind == "" || ref.Kind == embedopsv1.EmbeddingServerKind {
			named[ref.Namespace+"/"+ref.Name] = true
		}
	}
	return named
}
