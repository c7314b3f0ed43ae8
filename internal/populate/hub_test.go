package populate_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

func TestRunExplainsRefusalsAndMissingThings(t *testing.T) {
	const token = "hf_stand_in_secret"
	cases := []struct {
		name     string
		setup    func(hub *hubtest.Hub)
		modify   func(*populate.Options)
		sentinel error
		messages []string
	}{
		{
			name:     "401 for a wrong token",
			setup:    func(hub *hubtest.Hub) { hub.RequireToken("hf_the_right_one") },
			modify:   func(o *populate.Options) { o.Token = token },
			sentinel: populate.ErrAccessDenied,
			messages: []string{"the hub refused the token: set HF_TOKEN / check tokenSecretRef", "HTTP 401", "Invalid credentials"},
		},
		{
			name:     "401 for a private or missing model without a token",
			modify:   func(o *populate.Options) { o.Model = "org/private" },
			sentinel: populate.ErrAccessDenied,
			messages: []string{`HTTP 401 for model "org/private"`, "does not exist or is private", "no token was sent"},
		},
		{
			name:     "403 for a gated model",
			setup:    func(hub *hubtest.Hub) { hub.Gate(testModel) },
			modify:   func(o *populate.Options) { o.Token = token },
			sentinel: populate.ErrAccessDenied,
			messages: []string{"HTTP 403", "accept its conditions"},
		},
		{
			name:     "404 names the model",
			modify:   func(o *populate.Options) { o.Model, o.Token = "org/missing", token },
			sentinel: populate.ErrNotFound,
			messages: []string{`model "org/missing": not found on the hub`},
		},
		{
			name:     "404 names the revision",
			modify:   func(o *populate.Options) { o.Revision = "no-such-branch" },
			sentinel: populate.ErrNotFound,
			messages: []string{`revision "no-such-branch" of model "org/embed": not found on the hub`},
		},
		{
			name:     "404 names the model without error codes",
			setup:    func(hub *hubtest.Hub) { hub.OmitErrorCodes() },
			modify:   func(o *populate.Options) { o.Model, o.Token = "org/missing", token },
			sentinel: populate.ErrNotFound,
			messages: []string{`model "org/missing": not found on the hub`},
		},
		{
			name:     "404 names the revision without error codes",
			setup:    func(hub *hubtest.Hub) { hub.OmitErrorCodes() },
			modify:   func(o *populate.Options) { o.Revision = "no-such-branch" },
			sentinel: populate.ErrNotFound,
			messages: []string{`revision "no-such-branch" of model "org/embed": not found on the hub`},
		},
		{
			name:     "404 names the file",
			setup:    func(hub *hubtest.Hub) { hub.FailNext("/"+testModel+"/resolve/", 404, 1) },
			sentinel: populate.ErrNotFound,
			messages: []string{`file "config.json" of model "org/embed" at commit`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, _ := newHub(t)
			if tc.setup != nil {
				tc.setup(hub)
			}
			dir := t.TempDir()
			s := &sleeper{}
			opts := options(t, hub, dir, s)
			if tc.modify != nil {
				tc.modify(&opts)
			}
			var lines logLines
			opts.Log = lines.logger()

			_, err := populate.Run(context.Background(), opts)

			g.Expect(err).To(MatchError(tc.sentinel))
			for _, message := range tc.messages {
				g.Expect(err).To(MatchError(ContainSubstring(message)))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring(token))
			g.Expect(lines.String()).NotTo(ContainSubstring(token))
			g.Expect(s.recorded()).To(BeEmpty(), "refusals and 404s are not retried")
			g.Expect(leftovers(g, dir)).To(BeEmpty())
		})
	}
}

func TestRunRetriesTransientFailures(t *testing.T) {
	cases := []struct {
		name   string
		prefix string
		status int
	}{
		{"503 resolving the revision", "/api/models/", 503},
		{"503 downloading a file", "/" + testModel + "/resolve/", 503},
		{"429 downloading from the CDN", "/cdn-lfs/", 429},
		{"502 downloading a file", "/" + testModel + "/resolve/", 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			hub.FailNext(tc.prefix, tc.status, 2)
			dir := t.TempDir()
			s := &sleeper{}

			result, err := populate.Run(context.Background(), options(t, hub, dir, s))

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(result.ResolvedCommit).To(Equal(commit))
			g.Expect(s.recorded()).To(Equal([]time.Duration{time.Second, 2 * time.Second}), "exponential backoff")
			expectCached(g, dir, commit, modelFiles())
		})
	}
}

func TestRunSendsTheTokenWithoutLoggingIt(t *testing.T) {
	g := NewWithT(t)
	const token = "hf_stand_in_secret"
	hub, _ := newHub(t)
	hub.RequireToken(token)
	hub.FailNext("/api/models/", 503, 1)
	opts := options(t, hub, t.TempDir(), &sleeper{})
	opts.Token = token
	var lines logLines
	opts.Log = lines.logger()

	_, err := populate.Run(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range append(requestsTo(hub, "/api/"), requestsTo(hub, "/resolve/")...) {
		g.Expect(r.Authorization).To(Equal("Bearer "+token), r.Path)
	}
	g.Expect(lines.String()).To(ContainSubstring("retrying"))
	g.Expect(lines.String()).NotTo(ContainSubstring(token))
}

func TestExponentialBackoff(t *testing.T) {
	backoff := populate.ExponentialBackoff(time.Second, 30*time.Second)
	cases := []struct {
		retry int
		want  time.Duration
	}{
		{0, time.Second},
		{1, 2 * time.Second},
		{4, 16 * time.Second},
		{5, 30 * time.Second},
		{1000, 30 * time.Second},
	}
	for _, tc := range cases {
		t.Run("retry "+strconv.Itoa(tc.retry), func(t *testing.T) {
			NewWithT(t).Expect(backoff(tc.retry)).To(Equal(tc.want))
		})
	}
}

func TestSleepContextEndsWithItsContext(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Expect(populate.SleepContext(ctx, time.Hour)).To(MatchError(context.Canceled))
	g.Expect(populate.SleepContext(context.Background(), 0)).To(Succeed())
}
