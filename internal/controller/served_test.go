package controller

import (
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

func TestServedMismatches(t *testing.T) {
	const commit = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"
	server := &embedopsv1.EmbeddingServer{Spec: embedopsv1.EmbeddingServerSpec{Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"}}}
	served := func(id, sha, expected string, from embedopsv1.ServedComparison) *embedopsv1.ServedModel {
		return &embedopsv1.ServedModel{ModelID: id, ModelSHA: sha, ExpectedModelSHA: expected, ComparedWith: from}
	}
	cases := []struct {
		name   string
		served *embedopsv1.ServedModel
		want   []string
	}{
		{"same commit", served("BAAI/bge-small-en-v1.5", commit, commit, embedopsv1.ComparedWithResolvedCommit), nil},
		{"same branch", served("BAAI/bge-small-en-v1.5", "main", "main", embedopsv1.ComparedWithSpecRevision), nil},
		{"other commit", served("BAAI/bge-small-en-v1.5", "0000000000000000000000000000000000000000", commit, embedopsv1.ComparedWithResolvedCommit),
			[]string{"TEI serves model revision 0000000000000000000000000000000000000000, it was started on " + commit + " (the binding's resolved commit)"}},
		{"branch against its spec", served("BAAI/bge-small-en-v1.5", "main", "v2", embedopsv1.ComparedWithSpecRevision),
			[]string{"TEI serves model revision main, it was started on v2 (the spec's revision)"}},
		{"other model", served("BAAI/bge-large-en-v1.5", "main", "main", embedopsv1.ComparedWithSpecRevision),
			[]string{"TEI serves model BAAI/bge-large-en-v1.5, the spec asks for BAAI/bge-small-en-v1.5"}},
		{"no sha served", served("BAAI/bge-small-en-v1.5", "", commit, embedopsv1.ComparedWithResolvedCommit), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range servedMismatches(server, tc.served) {
				got = append(got, m.message)
			}
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}

func TestExpectedModelSHAIsWhatTEIRuns(t *testing.T) {
	const commit = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"
	server := &embedopsv1.EmbeddingServer{Spec: embedopsv1.EmbeddingServerSpec{Model: embedopsv1.ModelSpec{Name: "m", Revision: "v2"}}}
	cases := []struct {
		name     string
		cache    *builder.Cache
		want     string
		wantFrom embedopsv1.ServedComparison
	}{
		{"no cache", nil, "v2", embedopsv1.ComparedWithSpecRevision},
		{"no populator", &builder.Cache{Mode: embedopsv1.CacheModeShared, ResolvedCommit: commit}, "v2", embedopsv1.ComparedWithSpecRevision},
		{"populator before a commit is recorded", &builder.Cache{Mode: embedopsv1.CacheModeShared, PopulatorImage: "p"}, "v2", embedopsv1.ComparedWithSpecRevision},
		{"populated", &builder.Cache{Mode: embedopsv1.CacheModeShared, PopulatorImage: "p", ResolvedCommit: commit}, commit, embedopsv1.ComparedWithResolvedCommit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, from := expectedModelSHA(server, tc.cache)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(from).To(Equal(tc.wantFrom))
		})
	}
}

func TestAPIKeyArg(t *testing.T) {
	cases := []struct {
		args  []string
		want  string
		found bool
	}{
		{nil, "", false},
		{[]string{"--api-key=k1"}, "k1", true},
		{[]string{"--api-key", "k2"}, "k2", true},
		{[]string{"--api-key=k1", "--api-key", "k2"}, "k2", true},
		{[]string{"--api-key"}, "", false},
		{[]string{"--api-keys=x"}, "", false},
	}
	for _, tc := range cases {
		got, found := apiKeyArg(tc.args)
		NewWithT(t).Expect([]any{got, found}).To(Equal([]any{tc.want, tc.found}), "%v", tc.args)
	}
}
