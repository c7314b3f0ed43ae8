package populate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

// TestRunDownloadsFilesInParallel stalls the first file's download: with
// several downloads at once the other files arrive while it hangs, and the
// cache ends as a one-at-a-time run leaves it.
func TestRunDownloadsFilesInParallel(t *testing.T) {
	for _, parallel := range []int{1, populate.DefaultParallelDownloads} {
		t.Run(fmt.Sprintf("%d at once", parallel), func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			hub.StallNext("/"+testModel+"/resolve/"+commit+"/config.json", 1)
			dir := t.TempDir()
			var lines logLines
			opts := options(t, hub, dir, &sleeper{})
			opts.Parallel, opts.Log = parallel, lines.logger()
			// Ends the stalled request: the download is retried.
			opts.IdleTimeout = time.Second

			result, err := populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(result.ResolvedCommit).To(Equal(commit))
			expectCached(g, dir, commit, modelFiles())
			log := lines.String()
			retried := strings.Index(log, `operation="downloading config.json"`)
			weights := strings.Index(log, `msg="downloaded file" file=model.safetensors`)
			g.Expect(retried).To(BeNumerically(">", 0), log)
			if parallel == 1 {
				g.Expect(weights).To(BeNumerically(">", retried), "one at a time, the weights wait for config.json")
			} else {
				g.Expect(weights).To(BeNumerically("<", retried), "the weights arrived while config.json hung")
			}
		})
	}
}
