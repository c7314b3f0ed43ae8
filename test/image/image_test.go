package image

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/test/harness"
)

// OCI media types (opencontainers/image-spec specs-go/v1/mediatype.go).
const (
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	ociConfig   = "application/vnd.oci.image.config.v1+json"
	ociLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

func TestMakeImageWritesARunnableNonRootImage(t *testing.T) {
	g := NewWithT(t)
	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(t.TempDir(), "image")
	cmd := exec.Command("make", "--no-print-directory", "image", "IMAGE_DIR="+dir, "IMAGE_REF=embedops-controller:test")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "make image:\n%s", out)

	l := layout(dir)
	marker, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(marker)).To(ContainSubstring(`"imageLayoutVersion"`))
	var idx index
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &idx)).To(Succeed())
	g.Expect(idx.Manifests).To(HaveLen(1))
	desc := idx.Manifests[0]
	g.Expect(desc.MediaType).To(Equal(ociManifest))
	g.Expect(desc.Annotations).To(HaveKeyWithValue("org.opencontainers.image.ref.name", "embedops-controller:test"))

	var m manifest
	l.readJSON(t, desc, &m)
	g.Expect(m.Config.MediaType).To(Equal(ociConfig))
	var config imageConfig
	l.readJSON(t, m.Config, &config)
	g.Expect(config.OS).To(Equal("linux"))
	g.Expect(config.Architecture).To(Equal(runtime.GOARCH))
	g.Expect(config.Config.Entrypoint).To(Equal([]string{"/controller"}))
	g.Expect(config.Config.Cmd).To(BeEmpty())
	user, group, ok := strings.Cut(config.Config.User, ":")
	g.Expect(ok).To(BeTrue(), "user %q is uid:gid", config.Config.User)
	for _, id := range []string{user, group} {
		n, err := strconv.Atoi(id)
		g.Expect(err).NotTo(HaveOccurred(), "a numeric id, so runAsNonRoot can verify it")
		g.Expect(n).To(BeNumerically(">", 0), "not root")
	}

	g.Expect(m.Layers).To(HaveLen(1), "one layer on an empty base: nothing was pulled")
	g.Expect(m.Layers[0].MediaType).To(Equal(ociLayerGz))
	files := l.files(t, m.Layers[0])
	g.Expect(files).To(HaveKey("/etc/ssl/certs/ca-certificates.crt"))
	g.Expect(string(files["/etc/passwd"].data)).To(ContainSubstring(":" + user + ":" + group + ":"))
	for _, name := range []string{"/controller", "/embedops"} {
		g.Expect(files).To(HaveKey(name))
		file := files[name]
		g.Expect(file.header.Mode&0o111).NotTo(BeZero(), "%s is executable", name)
		expectStatic(g, name, file.data)
	}

	// The CLI in the image runs: the populator's entry point answers.
	binary := filepath.Join(t.TempDir(), "embedops")
	g.Expect(os.WriteFile(binary, files["/embedops"].data, 0o755)).To(Succeed())
	help, err := exec.Command(binary, "populate", "--help").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", help)
	g.Expect(string(help)).To(ContainSubstring("populate"))
}

// expectStatic checks that data is a Linux ELF executable with no
// interpreter and no shared libraries, as on a base without a libc.
func expectStatic(g *WithT, name string, data []byte) {
	f, err := elf.NewFile(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred(), "%s is an ELF binary", name)
	g.Expect(f.OSABI).To(BeElementOf(elf.ELFOSABI_NONE, elf.ELFOSABI_LINUX))
	for _, p := range f.Progs {
		g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "%s needs a dynamic loader", name)
	}
	libs, err := f.ImportedLibraries()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(libs).To(BeEmpty(), "%s links shared libraries", name)
}
