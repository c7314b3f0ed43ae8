package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// decideOptions are the flags of `embedops decide`.
type decideOptions struct {
	file          string
	kustomization string
	application   string
	repo          string
	revision      string
	namespace     string
	output        string
}

// decidedServer is one server's decision, shaped like a binding's spec.
type decidedServer struct {
	Server   string                   `json:"server"`
	Identity embedopsv1.CacheIdentity `json:"identity"`
	Decision embedopsv1.CacheDecision `json:"decision"`
}

func newDecideCommand() *cobra.Command {
	opts := decideOptions{}
	cmd := &cobra.Command{
		Use:   "decide (-f FILE | --kustomization FILE | --application FILE)",
		Short: "Print the cache decision the operator will record for each EmbeddingServer in FILE",
		Long: "decide reads EmbeddingServers from a YAML or JSON file (- for standard input) and prints, for\n" +
			"each, the identity and decision a ModelCacheBinding will record, digests included, so a change\n" +
			"can be checked before it is committed. Servers with cache.mode None record no binding.\n" +
			"With --kustomization or --application, the servers are those the Flux Kustomization or Argo CD\n" +
			"Application in FILE renders from --revision of the local repository --repo, rendered exactly as\n" +
			"the operator records and the audit re-renders them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDecide(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.file, "filename", "f", "", "file or directory of EmbeddingServers (- for standard input)")
	cmd.Flags().StringVar(&opts.kustomization, "kustomization", "", "a Flux Kustomization whose path to render")
	cmd.Flags().StringVar(&opts.application, "application", "", "an Argo CD Application whose source to render")
	cmd.Flags().StringVar(&opts.repo, "repo", ".", "the local repository the Kustomization or Application renders from")
	cmd.Flags().StringVar(&opts.revision, "revision", "HEAD", "the commit, branch or tag of --repo to render")
	cmd.Flags().StringVarP(&opts.namespace, "namespace", "n", "default", "namespace of servers that name none")
	cmd.Flags().StringVarP(&opts.output, "output", "o", outputYAML, "output format: yaml or json")
	cmd.MarkFlagsOneRequired("filename", "kustomization", "application")
	cmd.MarkFlagsMutuallyExclusive("filename", "kustomization", "application")
	return cmd
}

func runDecide(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, opts decideOptions) error {
	if opts.output != outputYAML && opts.output != outputJSON {
		return usageErrorf("unknown output format %q: use yaml or json", opts.output)
	}
	data, namespace, source, err := decideInput(ctx, stdin, opts)
	if err != nil {
		return err
	}
	servers, err := decision.ServersFromYAML(data, namespace)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	decided := make([]decidedServer, 0, len(servers))
	for _, server := range servers {
		name := server.Namespace + "/" + server.Name
		d, err := decision.For(server)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if d == nil {
			fmt.Fprintf(stderr, "%s: cache.mode None records no binding\n", name)
			continue
		}
		decided = append(decided, decidedServer{Server: name, Identity: d.Identity, Decision: d.Decision})
	}
	return printStructured(stdout, opts.output, decided)
}

// decideInput is the stream of servers to decide, the namespace of those
// that name none, and where the stream came from.
func decideInput(ctx context.Context, stdin io.Reader, opts decideOptions) ([]byte, string, string, error) {
	if opts.file != "" {
		data, err := readInput(stdin, opts.file)
		return data, opts.namespace, opts.file, err
	}
	data, namespace, err := renderGitOps(ctx, opts)
	return data, namespace, opts.kustomization + opts.application, err
}

// readInput reads a file, every YAML and JSON file of a directory (as
// kubectl -f does), or standard input for "-".
func readInput(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !info.IsDir() {
		return readFile(path)
	}
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml", "*.json"} {
		matches, _ := filepath.Glob(filepath.Join(path, pattern))
		files = append(files, matches...)
	}
	sort.Strings(files)
	var stream []byte
	for _, file := range files {
		data, err := readFile(file)
		if err != nil {
			return nil, err
		}
		stream = append(append(stream, "\n---\n"...), data...)
	}
	return stream, nil
}

func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, nil
}
