package endpoint

import (
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
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
			got, err := ParseInfo([]byte(tc.body))
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
		{CheckAuto, true, true, false},
		{CheckAuto, false, false, false},
		{"", true, true, false},
		{CheckOn, false, true, false},
		{CheckOn, true, true, false},
		{CheckOff, true, false, false},
		{CheckOff, false, false, false},
		{"yes", true, false, true},
		{"On", true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ResolveCheck(tc.mode, func() bool { return tc.inCluster })
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
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
	client := NewClient(DialTo(standIn.Listener.Addr().String()))

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
