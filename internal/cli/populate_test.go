package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// populated is populate's output, decoded strictly.
type populated struct {
	ResolvedCommit string   `json:"resolvedCommit"`
	ContentDigest  string   `json:"contentDigest"`
	Files          int      `json:"files"`
	Bytes          int64    `json:"bytes"`
	Names          []string `json:"names"`
	RepoBytes      int64    `json:"repositoryBytes"`
	Free           *int64   `json:"freeBytes"`
	Reclaimable    *int64   `json:"reclaimableBytes"`
}

func decodeStrict(g Gomega, data []byte) populated {
	var p populated
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	g.Expect(decoder.Decode(&p)).To(Succeed())
	return p
}

// withoutFree is p without its free bytes, which it must report: each run
// measures them afresh (statfs), and the filesystem the test's cache is on
// is shared with everything else the machine runs.
func withoutFree(g Gomega, p populated) populated {
	g.Expect(p.Free).To(HaveValue(BeNumerically(">", 0)), "a run reports its room")
	p.Free = nil
	return p
}

// standInHub serves model org/m on main and points HF_ENDPOINT at it.
func standInHub(t *testing.T) (*hubtest.Hub, string, []hubtest.File) {
	files := []hubtest.File{
		{Name: "config.json", Data: []byte(`{"model_type": "bert"}`)},
		{Name: "1_Pooling/config.json", Data: []byte(`{"pooling_mode_cls_token": true}`)},
		{Name: "model.safetensors", Data: bytes.Repeat([]byte("weights!"), 4096), LFS: true},
	}
	hub := hubtest.New(t)
	commit := hub.AddCommit("org/m", "main", files...)
	t.Setenv(populate.EnvEndpoint, hub.URL)
	t.Setenv(populate.EnvToken, "hf_cli_secret")
	return hub, commit, files
}

func TestPopulatePrintsAndRecordsTheResult(t *testing.T) {
	g := NewWithT(t)
	hub, commit, files := standInHub(t)
	dir := t.TempDir()
	terminationLog := filepath.Join(t.TempDir(), "termination-log")

	out, errOut, err := runCLI("", "populate", "--model", "org/m", "--revision", "main", "--dir", dir,
		"-o", "json", "--termination-log", terminationLog, "--prune")

	g.Expect(err).NotTo(HaveOccurred())
	printed := decodeStrict(g, []byte(out))
	g.Expect(printed.ResolvedCommit).To(Equal(commit))
	g.Expect(printed.ContentDigest).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	g.Expect(printed.Files).To(Equal(len(files)))
	var size int64
	for _, f := range files {
		size += int64(len(f.Data))
	}
	g.Expect(printed.Bytes).To(Equal(size))
	g.Expect(printed.Free).To(HaveValue(BeNumerically(">", 0)), "the pruning run reports the room it left")
	g.Expect(printed.Reclaimable).To(HaveValue(BeZero()), "the only revision is kept")

	logged, err := os.ReadFile(terminationLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(logged)).To(BeNumerically("<", 4096))
	g.Expect(decodeStrict(g, logged)).To(Equal(printed))

	g.Expect(errOut).To(ContainSubstring(`msg="resolved revision"`), "progress goes to standard error")
	g.Expect(errOut).NotTo(ContainSubstring("hf_cli_secret"))
	g.Expect(filepath.Join(dir, "models--org--m", "snapshots", commit, "1_Pooling", "config.json")).To(BeAnExistingFile())
	for _, r := range hub.Requests() {
		if r.Query == "blobs=true" {
			g.Expect(r.Authorization).To(Equal("Bearer hf_cli_secret"), "the token comes from HF_TOKEN")
		}
	}
}

func TestPopulateRecordsAFailureInTheTerminationLog(t *testing.T) {
	g := NewWithT(t)
	standInHub(t)
	terminationLog := filepath.Join(t.TempDir(), "termination-log")

	out, _, err := runCLI("", "populate", "--model", "org/missing", "--dir", t.TempDir(), "--termination-log", terminationLog)

	g.Expect(err).To(MatchError(populate.ErrNotFound))
	g.Expect(out).To(BeEmpty())
	logged, readErr := os.ReadFile(terminationLog)
	g.Expect(readErr).NotTo(HaveOccurred())
	var message struct {
		Error string `json:"error"`
	}
	g.Expect(json.Unmarshal(logged, &message)).To(Succeed())
	g.Expect(message.Error).To(Equal(err.Error()))
}

func TestPopulateKeepsLongFailuresUnderTheLimit(t *testing.T) {
	g := NewWithT(t)
	// Quotes and angle brackets grow when escaped, so the cut is made on the encoding.
	err := errors.New(strings.Repeat(`"<é>`, 5000))

	data := failureMessage(err)

	g.Expect(len(data)).To(BeNumerically("<=", maxTerminationMessage))
	g.Expect(len(data)).To(BeNumerically(">", maxTerminationMessage/2))
	var message struct {
		Error string `json:"error"`
	}
	g.Expect(json.Unmarshal(data, &message)).To(Succeed())
	g.Expect(err.Error()).To(HavePrefix(message.Error))
}

func TestPopulateReportsBadInput(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		message string
		usage   bool
	}{
		{"no model", []string{"populate", "--dir", "d"}, `required flag(s) "model" not set`, false},
		{"no directory", []string{"populate", "--model", "org/m"}, "give either --dir, the cache to fill, or --resolve-only", true},
		{"directory and resolve only", []string{"populate", "--model", "org/m", "--dir", "d", "--resolve-only"}, "give either --dir", true},
		{"verify only without a directory", []string{"populate", "--model", "org/m", "--resolve-only", "--verify-only"}, "--verify-only checks the cache in --dir", true},
		{"unknown format", []string{"populate", "--model", "org/m", "--dir", "d", "-o", "xml"}, `unknown output format "xml"`, true},
		{"invalid model", []string{"populate", "--model", "../m", "--dir", "d"}, `invalid model "../m"`, false},
		{"unknown verification", []string{"populate", "--model", "org/m", "--dir", "d", "--verify", "quick"}, `--verify: invalid verification "quick": want sizes or full`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			standInHub(t) // should a check regress, no request leaves loopback
			_, _, err := runCLI("", tc.args...)
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			g.Expect(IsUsageError(err)).To(Equal(tc.usage))
		})
	}
}

func TestPopulateResultMessageDropsNamesThatDoNotFit(t *testing.T) {
	g := NewWithT(t)
	result := populate.Result{ResolvedCommit: strings.Repeat("a", 40), Files: 300, Bytes: 1 << 40}
	for i := range 300 {
		result.Names = append(result.Names, fmt.Sprintf("model-%05d-of-00300.safetensors", i))
	}

	data, err := resultMessage(result)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(data)).To(BeNumerically("<=", maxTerminationMessage))
	decoded := decodeStrict(g, data)
	g.Expect(decoded.Names).To(BeEmpty())
	g.Expect(decoded.Files).To(Equal(300))

	result.Names = result.Names[:3]
	data, err = resultMessage(result)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(decodeStrict(g, data).Names).To(HaveLen(3), "names that fit are kept")
}

func TestPopulateVerifiesInFullOnRequest(t *testing.T) {
	cases := []struct {
		name     string
		flags    []string
		repaired bool
	}{
		{"by size by default: a changed byte goes unread", nil, false},
		{"--verify=sizes: a changed byte goes unread", []string{"--verify=sizes"}, false},
		{"--verify=full: a changed byte is downloaded again", []string{"--verify=full"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit, files := standInHub(t)
			dir := t.TempDir()
			// --prune as the controller runs it, so each run reports its room.
			args := []string{"populate", "--model", "org/m", "--revision", commit, "--dir", dir, "--prune"}
			first, _, err := runCLI("", args...)
			g.Expect(err).NotTo(HaveOccurred())
			weights := files[2]
			blob := filepath.Join(dir, "models--org--m", "blobs", hubtest.SHA256(weights.Data))
			damaged := bytes.Clone(weights.Data)
			damaged[100] ^= 0xff
			g.Expect(os.WriteFile(blob, damaged, 0o644)).To(Succeed())
			downloads := len(hub.Requests())

			second, errOut, err := runCLI("", append(args, tc.flags...)...)

			g.Expect(err).NotTo(HaveOccurred(), errOut)
			g.Expect(withoutFree(g, decodeStrict(g, []byte(second)))).To(Equal(withoutFree(g, decodeStrict(g, []byte(first)))), "the result of the run that populated the cache")
			if tc.repaired {
				g.Expect(os.ReadFile(blob)).To(Equal(weights.Data))
				g.Expect(len(hub.Requests())).To(BeNumerically(">", downloads))
				return
			}
			g.Expect(os.ReadFile(blob)).To(Equal(damaged), "no file was read")
			g.Expect(hub.Requests()).To(HaveLen(downloads), "the hub is not asked")
		})
	}
}

func TestPopulateWithAllBackendsIgnoresTheImage(t *testing.T) {
	cases := []struct {
		name  string
		flags []string
		want  []string
		not   []string
	}{
		{"--image alone: what the CPU image reads", []string{"--image", "ghcr.io/huggingface/text-embeddings-inference:cpu-1.9"},
			[]string{"onnx/model.onnx", "tokenizer_config.json"}, []string{"model.safetensors", "modules.json"}},
		{"--all-backends: what any image reads", []string{"--image", "ghcr.io/huggingface/text-embeddings-inference:cpu-1.9", "--all-backends"},
			[]string{"onnx/model.onnx", "tokenizer_config.json", "model.safetensors", "modules.json"}, []string{"pytorch_model.bin"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			hub.AddCommit("org/m", "main", hubtest.MultiFormatRepository(256)...)
			t.Setenv(populate.EnvEndpoint, hub.URL)

			out, errOut, err := runCLI("", append([]string{"populate", "--model", "org/m", "--dir", t.TempDir()}, tc.flags...)...)

			g.Expect(err).NotTo(HaveOccurred(), errOut)
			names := decodeStrict(g, []byte(out)).Names
			g.Expect(names).To(ContainElements(tc.want))
			for _, name := range tc.not {
				g.Expect(names).NotTo(ContainElement(name))
			}
		})
	}
}

func TestPopulateRecordsABadEnvironmentInTheTerminationLog(t *testing.T) {
	g := NewWithT(t)
	hub, _, _ := standInHub(t)
	t.Setenv(populate.EnvDownloadTimeout, "10s")
	terminationLog := filepath.Join(t.TempDir(), "termination-log")

	_, _, err := runCLI("", "populate", "--model", "org/m", "--dir", t.TempDir(), "--termination-log", terminationLog)

	g.Expect(err).To(MatchError(populate.ErrInvalid))
	g.Expect(err).To(MatchError(ContainSubstring(`HF_HUB_DOWNLOAD_TIMEOUT="10s": want whole seconds`)))
	logged, readErr := os.ReadFile(terminationLog)
	g.Expect(readErr).NotTo(HaveOccurred())
	g.Expect(string(logged)).To(ContainSubstring("HF_HUB_DOWNLOAD_TIMEOUT"))
	g.Expect(hub.Requests()).To(BeEmpty())
}

func TestPopulateResolveOnlyRecordsTheCommitAndDownloadsNothing(t *testing.T) {
	g := NewWithT(t)
	hub, commit, _ := standInHub(t)
	terminationLog := filepath.Join(t.TempDir(), "termination-log")

	out, _, err := runCLI("", "populate", "--model", "org/m", "--revision", "main", "--resolve-only",
		"--termination-log", terminationLog)

	g.Expect(err).NotTo(HaveOccurred())
	printed := decodeStrict(g, []byte(out))
	g.Expect(printed.ResolvedCommit).To(Equal(commit))
	g.Expect(printed.Bytes).To(And(BeNumerically(">", 0), Equal(printed.RepoBytes)), "what the commit lists: without --image, every file")
	g.Expect(printed.Free).To(BeNil(), "no cache, no room")
	logged, err := os.ReadFile(terminationLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(decodeStrict(g, logged).ResolvedCommit).To(Equal(commit))
	g.Expect(hub.Requests()).To(ConsistOf(HaveField("Authorization", "Bearer hf_cli_secret")),
		"one request, the revision's, with the token")
}

func TestPopulateVerifyOnlyChecksAFilledCacheOffline(t *testing.T) {
	g := NewWithT(t)
	hub := hubtest.New(t)
	commit := hub.AddCommit("org/m", "main",
		hubtest.File{Name: "config.json", Data: []byte(`{"model_type": "bert"}`)},
		hubtest.File{Name: "tokenizer.json", Data: []byte(`{}`)},
		hubtest.File{Name: "model.safetensors", Data: bytes.Repeat([]byte("weights!"), 64), LFS: true})
	t.Setenv(populate.EnvEndpoint, hub.URL)
	dir := t.TempDir()
	_, _, err := runCLI("", "populate", "--model", "org/m", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), "the user fills the cache")
	before := len(hub.Requests())
	terminationLog := filepath.Join(t.TempDir(), "termination-log")

	out, _, err := runCLI("", "populate", "--model", "org/m", "--revision", "main", "--dir", dir, "--verify-only",
		"--termination-log", terminationLog)

	g.Expect(err).NotTo(HaveOccurred())
	result := decodeStrict(g, []byte(out))
	g.Expect(result.ResolvedCommit).To(Equal(commit))
	g.Expect(result.Names).To(ContainElements("config.json", "tokenizer.json", "model.safetensors"))
	logged, err := os.ReadFile(terminationLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(decodeStrict(g, logged).ResolvedCommit).To(Equal(commit))
	g.Expect(hub.Requests()).To(HaveLen(before), "no request reaches the hub")

	_, _, err = runCLI("", "populate", "--model", "org/m", "--revision", "v2", "--dir", dir, "--verify-only",
		"--termination-log", terminationLog)
	g.Expect(err).To(MatchError(ContainSubstring("no models--org--m/refs/v2")))
	logged, err = os.ReadFile(terminationLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logged)).To(ContainSubstring(`"error":"the model is not in the cache: no models--org--m/refs/v2`))
}

// populate deletes nothing unless given --prune, which the controller
// passes; with it the older revisions go, but the one the last run left.
func TestPopulatePrunesOnlyWithPrune(t *testing.T) {
	g := NewWithT(t)
	hub, _, files := standInHub(t)
	var commits []string
	for i := range 3 {
		commits = append(commits, hub.AddCommit("org/m", "main", append(files, hubtest.File{Name: "README.md", Data: fmt.Appendf(nil, "revision %d", i)})...))
	}
	for _, tc := range []struct {
		flags []string
		kept  []string
	}{
		{nil, commits},
		{[]string{"--prune=false"}, commits},
		{[]string{"--prune"}, commits[1:]},
		{[]string{"--prune=true"}, commits[1:]},
	} {
		t.Run(fmt.Sprint(tc.flags), func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			for _, commit := range commits {
				args := append([]string{"populate", "--model", "org/m", "--revision", commit, "--dir", dir}, tc.flags...)
				_, _, err := runCLI("", args...)
				g.Expect(err).NotTo(HaveOccurred())
			}
			entries, err := os.ReadDir(filepath.Join(dir, "models--org--m", "snapshots"))
			g.Expect(err).NotTo(HaveOccurred())
			var snapshots []string
			for _, e := range entries {
				snapshots = append(snapshots, e.Name())
			}
			g.Expect(snapshots).To(ConsistOf(tc.kept))
		})
	}
	help, _, err := runCLI("", "populate", "--help")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(help).To(ContainSubstring("It deletes nothing unless given --prune"))
	g.Expect(help).To(ContainSubstring("The controller\npasses --prune"))
}

// A full cache is named in the termination message's reason, which the
// controller reads to move a server to new storage.
func TestPopulateNamesAFullDiskInItsFailure(t *testing.T) {
	g := NewWithT(t)
	var message terminationMessage
	g.Expect(json.Unmarshal(failureMessage(fmt.Errorf("writing blob: %w", populate.ErrDiskFull)), &message)).To(Succeed())
	g.Expect(message.Reason).To(Equal(populate.DiskFullReason))
	var other terminationMessage
	g.Expect(json.Unmarshal(failureMessage(errors.New("hub said no")), &other)).To(Succeed())
	g.Expect(other.Reason).To(BeEmpty())
}
