package populate_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

func TestEnvOptions(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    populate.Options
		message string
	}{
		{"nothing set", nil, populate.Options{}, ""},
		{"endpoint and token", map[string]string{"HF_ENDPOINT": "https://hub.example", "HF_TOKEN": "hf_x"},
			populate.Options{Endpoint: "https://hub.example", Token: "hf_x"}, ""},
		{"timeouts in seconds", map[string]string{"HF_HUB_DOWNLOAD_TIMEOUT": "30", "HF_HUB_ETAG_TIMEOUT": " 5 "},
			populate.Options{IdleTimeout: 30 * time.Second, MetadataTimeout: 5 * time.Second}, ""},
		{"zero keeps the defaults", map[string]string{"HF_HUB_DOWNLOAD_TIMEOUT": "0", "HF_HUB_ETAG_TIMEOUT": "0"}, populate.Options{}, ""},
		{"a unit", map[string]string{"HF_HUB_DOWNLOAD_TIMEOUT": "10s"}, populate.Options{}, `HF_HUB_DOWNLOAD_TIMEOUT="10s": want whole seconds`},
		{"a fraction", map[string]string{"HF_HUB_ETAG_TIMEOUT": "1.5"}, populate.Options{}, `HF_HUB_ETAG_TIMEOUT="1.5": want whole seconds`},
		{"negative", map[string]string{"HF_HUB_ETAG_TIMEOUT": "-1"}, populate.Options{}, `HF_HUB_ETAG_TIMEOUT="-1": want whole seconds`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)

			opts, err := populate.EnvOptions(func(name string) string { return tc.env[name] })

			if tc.message != "" {
				g.Expect(err).To(MatchError(populate.ErrInvalid))
				g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(opts).To(Equal(tc.want))
		})
	}
}
