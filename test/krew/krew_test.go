package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// TestPackagesThePluginAsKrewInstallsIt builds this machine's archive and
// reads it back as krew does: the manifest's platform matches, its sha256
// is the archive's, the archive holds the manifest's bin, executable, and
// that binary is the CLI with the stamped version.
func TestPackagesThePluginAsKrewInstallsIt(t *testing.T) {
	g := NewWithT(t)
	out := t.TempDir()
	host := [2]string{runtime.GOOS, runtime.GOARCH}

	g.Expect(run(t.Context(), "../..", out, "v0.3.0", "0123abc", "", [][2]string{host})).To(Succeed())

	data, err := os.ReadFile(filepath.Join(out, "embedops.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var manifest plugin
	g.Expect(yaml.UnmarshalStrict(data, &manifest)).To(Succeed())
	g.Expect(manifest.APIVersion).To(Equal("krew.googlecontainertools.github.com/v1alpha2"))
	g.Expect(manifest.Kind).To(Equal("Plugin"))
	g.Expect(manifest.Metadata.Name).To(Equal("embedops"), "krew runs it as kubectl embedops")
	g.Expect(manifest.Spec.Version).To(Equal("v0.3.0"))
	g.Expect(manifest.Spec.Platforms).To(HaveLen(1))
	p := manifest.Spec.Platforms[0]
	g.Expect(p.Selector.MatchLabels).To(Equal(map[string]string{"os": runtime.GOOS, "arch": runtime.GOARCH}))
	g.Expect(p.URI).To(HavePrefix("file://" + out))

	archive, err := os.ReadFile(strings.TrimPrefix(p.URI, "file://"))
	g.Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(archive)
	g.Expect(p.SHA256).To(Equal(hex.EncodeToString(sum[:])))
	binary := extract(g, archive, p.Bin, t.TempDir())
	version, err := exec.CommandContext(t.Context(), binary, "version").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(version)).To(Equal("embedops v0.3.0 (commit 0123abc)\n"))
}

func TestURIsArePublishedUnderTheBase(t *testing.T) {
	a := archive{path: "/x/kubectl-embedops_linux_amd64.tar.gz"}.withURI("https://downloads.example/v1/")
	NewWithT(t).Expect(a.uri).To(Equal("https://downloads.example/v1/kubectl-embedops_linux_amd64.tar.gz"))
}

// extract writes the archive's entry name into dir, as krew installs it,
// and returns its path; the entry must be executable.
func extract(g Gomega, archive []byte, name, dir string) string {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	g.Expect(err).NotTo(HaveOccurred())
	tr := tar.NewReader(gz)
	for {
		header, err := tr.Next()
		g.Expect(err).NotTo(HaveOccurred(), "the archive has no %s", name)
		if header.Name != name {
			continue
		}
		g.Expect(header.Mode&0o111).NotTo(BeZero(), "executable")
		content, err := io.ReadAll(tr)
		g.Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(dir, name)
		g.Expect(os.WriteFile(path, content, 0o755)).To(Succeed())
		return path
	}
}
