package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/tei"
	"github.com/embedops/embedops/test/harness"
)

// archive is a docker-archive tarball's entries by name.
type archive map[string][]byte

// archiveManifest is one image of manifest.json (docker image save's
// format, moby image/tarexport).
type archiveManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

func TestTEIStandInImageIsTaggedAsTheDefaultImageAndStartsAsTEI(t *testing.T) {
	g := NewWithT(t)
	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	out := filepath.Join(t.TempDir(), "images", "tei-standin.tar")
	args := []string{"run", ".", "-repo", root, "-format", "docker-archive", "-o", out,
		"-package", "./test/standin/tei", "-binary", "/usr/local/bin/text-embeddings-router",
		"-cmd", "--json-output", "-user=", "-ref-const", "api/v1alpha1.DefaultImage"}
	for name, value := range tei.ImageEnv {
		args = append(args, "-env", name+"="+value)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, "test", "tools", "image")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	output, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", output)

	a := readArchive(t, out)
	var manifests []archiveManifest
	g.Expect(json.Unmarshal(a["manifest.json"], &manifests)).To(Succeed())
	g.Expect(manifests).To(HaveLen(1))
	m := manifests[0]
	g.Expect(m.RepoTags).To(Equal([]string{embedopsv1.DefaultImage}), "pods on the API's default image run the stand-in")
	var config imageConfig
	g.Expect(json.Unmarshal(a[m.Config], &config)).To(Succeed())
	g.Expect(config.Config.Entrypoint).To(Equal([]string{"/usr/local/bin/text-embeddings-router"}))
	g.Expect(config.Config.Cmd).To(Equal([]string{"--json-output"}), "TEI's image CMD")
	g.Expect(config.Config.User).To(BeEmpty(), "TEI's image sets no USER")
	for name, value := range tei.ImageEnv {
		g.Expect(config.Config.Env).To(ContainElement(name + "=" + value))
	}
	g.Expect(m.Layers).To(HaveLen(1))
	files := layerFiles(t, a[m.Layers[0]])
	router := files["/usr/local/bin/text-embeddings-router"]
	g.Expect(router).NotTo(BeNil())
	expectStatic(g, "text-embeddings-router", router)

	// The container as the kubelet starts it, without a model id: clap
	// refuses it with status 2.
	binary := filepath.Join(t.TempDir(), "text-embeddings-router")
	g.Expect(os.WriteFile(binary, router, 0o755)).To(Succeed())
	start := exec.Command(binary, config.Config.Cmd...)
	start.Env = config.Config.Env
	var stderr bytes.Buffer
	start.Stderr = &stderr
	err = start.Run()
	var exit *exec.ExitError
	g.Expect(errors.As(err, &exit)).To(BeTrue(), "%v", err)
	g.Expect(exit.ExitCode()).To(Equal(tei.UsageExitCode))
	g.Expect(stderr.String()).To(ContainSubstring("--model-id <MODEL_ID>"))
}

// readArchive reads a tarball's entries.
func readArchive(t *testing.T, path string) archive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	return readTar(t, f, "")
}

// layerFiles reads a gzip-compressed layer's files by absolute path.
func layerFiles(t *testing.T, layer []byte) archive {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	return readTar(t, zr, "/")
}

// readTar reads a tar's regular files and directories, named with prefix.
func readTar(t *testing.T, r io.Reader, prefix string) archive {
	t.Helper()
	entries := archive{}
	tr := tar.NewReader(r)
	for {
		header, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[prefix+strings.TrimSuffix(header.Name, "/")] = data
	}
}
