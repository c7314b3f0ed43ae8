package controller

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

// teiInfoBody is an /info answer of TEI 1.9, trimmed.
const teiInfoBody = `{
  "model_id": "BAAI/bge-small-en-v1.5",
  "model_sha": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a",
  "model_dtype": "float32",
  "model_type": {"embedding": {"pooling": "cls"}},
  "max_concurrent_requests": 512,
  "max_input_length": 512,
  "max_batch_tokens": 16384,
  "version": "1.9.0"
}`

func TestParseInfo(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		want    *embedopsv1.ServedModel
		wantErr string
	}{
		{"TEI answer", teiInfoBody, &embedopsv1.ServedModel{
			ModelID: "BAAI/bge-small-en-v1.5", ModelSHA: "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a", DType: "float32", MaxInputLength: 512,
		}, ""},
		{"local model without sha", `{"model_id":"/data/model","model_sha":null,"model_dtype":"float16","max_input_length":8192}`,
			&embedopsv1.ServedModel{ModelID: "/data/model", DType: "float16", MaxInputLength: 8192}, ""},
		{"model id only", `{"model_id":"m"}`, &embedopsv1.ServedModel{ModelID: "m"}, ""},
		{"no model id", `{"model_sha":"abc"}`, nil, "no model_id"},
		{"empty model id", `{"model_id":""}`, nil, "no model_id"},
		{"not JSON", `<html>502 Bad Gateway</html>`, nil, "parsing /info"},
		{"wrong type", `{"model_id":"m","max_input_length":"long"}`, nil, "parsing /info"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parseInfo([]byte(tc.body))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestResolveEndpointCheck(t *testing.T) {
	cases := []struct {
		mode      string
		inCluster bool
		want      bool
		wantErr   bool
	}{
		{EndpointCheckAuto, true, true, false},
		{EndpointCheckAuto, false, false, false},
		{"", true, true, false},
		{EndpointCheckOn, false, true, false},
		{EndpointCheckOn, true, true, false},
		{EndpointCheckOff, true, false, false},
		{EndpointCheckOff, false, false, false},
		{"yes", true, false, true},
		{"On", true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ResolveEndpointCheck(tc.mode, func() bool { return tc.inCluster })
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

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

func TestEndpointClientAsksInfoThroughTheDialer(t *testing.T) {
	g := NewWithT(t)
	status := http.StatusOK
	var host, path, auth string
	standIn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, path, auth = r.Host, r.URL.Path, r.Header.Get("Authorization")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(teiInfoBody))
	}))
	defer standIn.Close()
	client := NewEndpointClient(dialTo(standIn.Listener.Addr().String()))

	served, err := client.Info(t.Context(), "http://tei.models.svc:8080/info", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served.ModelID).To(Equal("BAAI/bge-small-en-v1.5"))
	g.Expect(host).To(Equal("tei.models.svc:8080"))
	g.Expect(path).To(Equal("/info"))
	g.Expect(auth).To(BeEmpty())

	_, err = client.Info(t.Context(), "http://tei.models.svc:8080/info", "s3cret")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(auth).To(Equal("Bearer s3cret"))

	status = http.StatusServiceUnavailable
	_, err = client.Info(t.Context(), "http://tei.models.svc:8080/info", "")
	g.Expect(err).To(MatchError(ContainSubstring("503")))

	status = http.StatusUnauthorized
	_, err = client.Info(t.Context(), "http://tei.models.svc:8080/info", "")
	g.Expect(err).To(MatchError(ContainSubstring("TEI wants an API key")))
	_, err = client.Info(t.Context(), "http://tei.models.svc:8080/info", "s3cret")
	g.Expect(err).To(MatchError(ContainSubstring("TEI refused the server's API key")))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
}

// dialTo is a DialFunc that reaches address whatever was asked for.
func dialTo(address string) DialFunc {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, network, address)
	}
}
