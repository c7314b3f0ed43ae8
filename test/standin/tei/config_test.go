package main

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/tei"
)

func TestConfigFollowsTEIDefaults(t *testing.T) {
	g := NewWithT(t)
	parsed, err := tei.Parse([]string{"--model-id=org/embed"}, map[string]string{"HOSTNAME": "server-0"})
	g.Expect(err).NotTo(HaveOccurred())
	c, err := configOf(parsed, map[string]string{"HOME": "/home/u"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.addr()).To(Equal("0.0.0.0:3000"), "the pod name is no address; no PORT without the image")
	g.Expect(c.promAddr()).To(Equal("0.0.0.0:9000"))
	g.Expect(c.hostWarning).NotTo(BeEmpty())
	g.Expect(c.cacheDir).To(Equal(filepath.Join("/home/u", ".cache", "huggingface", "hub")))
	g.Expect(c.endpoint).To(Equal(populate.DefaultEndpoint))
	g.Expect(c.downloadRevision()).To(Equal("main"))
	g.Expect(c.backends).To(Equal([]string{backendORT, backendCandle}))
	g.Expect(c.batchCompute).To(BeZero(), "a batch is embedded once")

	c, err = configOf(parsed, map[string]string{"HF_HOME": "/hf", "HF_ENDPOINT": "http://127.0.0.1:1/", BackendsVariable: "candle"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.cacheDir).To(Equal("/hf/hub"))
	g.Expect(c.endpoint).To(Equal("http://127.0.0.1:1"))
	g.Expect(c.backends).To(Equal([]string{backendCandle}))

	c, err = configOf(parsed, map[string]string{BatchComputeVariable: "1.5s"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.batchCompute).To(Equal(1500 * time.Millisecond))
	for _, bad := range []string{"1", "soon", "-1s"} {
		_, err = configOf(parsed, map[string]string{BatchComputeVariable: bad})
		g.Expect(err).To(MatchError(ContainSubstring(BatchComputeVariable+": want a duration")), bad)
	}

	g.Expect(c.backendDiesAt).To(BeZero(), "the backend never dies unless told")
	c, err = configOf(parsed, map[string]string{BackendDiesAtVariable: "3"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.backendDiesAt).To(Equal(3))
	for _, bad := range []string{"0", "-1", "soon"} {
		_, err = configOf(parsed, map[string]string{BackendDiesAtVariable: bad})
		g.Expect(err).To(MatchError(ContainSubstring(BackendDiesAtVariable+": want a batch number")), bad)
	}

	_, err = configOf(parsed, map[string]string{BackendsVariable: "python"})
	g.Expect(err).To(MatchError(ContainSubstring(`unknown backend "python"`)))
}
