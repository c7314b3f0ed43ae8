package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/provenance"
)

// ErrMismatch is returned when any audited binding is a Mismatch; the
// command exits with status 1 for it.
var ErrMismatch = errors.New("a recorded decision does not match its manifest")

// progressThreshold is how many commits a walk needs before a progress bar
// is worth drawing.
const progressThreshold = 300

// auditOptions are the flags of `embedops audit`.
type auditOptions struct {
	kube     kubeOptions
	file     string
	repo     string
	cacheDir string
	output   string
	// sshKey and knownHosts are files whose credentials override the
	// cluster's.
	sshKey     string
	knownHosts string
	// credentialsFor are the repositories the credentials of the flags
	// and the environment are for (with $GIT_CREDENTIALS_FOR); they go
	// over plain http only with allowInsecureCredentials.
	credentialsFor           []string
	allowInsecureCredentials bool
	// argoNamespace is Argo CD's own namespace, where it keeps its
	// repository Secrets and its known hosts and TLS certificates.
	argoNamespace string
	// allowDeclaredHosts are hosts a Declared binding's repository may be
	// cloned from besides those of the cluster's Flux and Argo CD sources.
	allowDeclaredHosts []string
	// requireAttested fails the audit on a binding whose revision no
	// GitOps tool attests; requireVerified on one not Verified.
	requireAttested bool
	requireVerified bool
}

func newAuditCommand() *cobra.Command {
	opts := auditOptions{}
	cmd := &cobra.Command{
		Use:   "audit [BINDING...]",
		Short: "Verify recorded cache decisions against the git commits that made them",
		Long: "audit reads ModelCacheBindings from the cluster (or -f FILE), checks out each one's recorded commit,\n" +
			"renders its path with kustomize, recomputes the decision and reports Verified, Mismatch or\n" +
			"Unverifiable, with the commit that originally made the decision. Exit status 1 means a Mismatch.\n\n" +
			"Clones authenticate, first to last: with --ssh-key, --known-hosts and $GIT_BEARER_TOKEN, $GIT_TOKEN or\n" +
			"$GIT_USERNAME/$GIT_PASSWORD, sent only to the repositories --credentials-for or $GIT_CREDENTIALS_FOR\n" +
			"name ([SCHEME://]HOST[:PORT][/PATH-PREFIX]; over plain http only with --allow-insecure-credentials);\n" +
			"then, for a binding read from the cluster, to its own repository only, as Flux or Argo CD does (the\n" +
			"GitRepository's secretRef with its ca.crt, tls.crt and tls.key, keys chosen by the URL's scheme, or an\n" +
			"OCIRepository's certSecretRef; Argo CD's repository or repo-creds Secret, SSH known hosts and TLS\n" +
			"certificates, read from Argo CD's own namespace, --argocd-namespace); else anonymously over HTTP(S) and\n" +
			"with the SSH agent over SSH. SSH host keys and TLS certificates are always checked. A repository URL\n" +
			"with credentials in it, a redirect to another host of a request that carries credentials, and a local\n" +
			"path named by a binding read from the cluster are refused (-f FILE's bindings may name one).\n\n" +
			"The SOURCE column says who vouches for the recorded revision: Attested (a Flux Kustomization's or Argo CD\n" +
			"Application's status), Declared (only the server's embedops.dev/source-* annotations) or Unattested.\n" +
			"A Declared repository is cloned only from a host a Flux source or Argo CD Application of the cluster\n" +
			"uses, or one --allow-declared-host names; otherwise the binding is Unverifiable. --require-attested and\n" +
			"--require-verified make a CI gate: exit status 4 when a binding is not Attested or not Verified.",
		RunE: func(cmd *cobra.Command, names []string) error {
			return runAudit(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), opts, names)
		},
	}
	opts.kube.bind(cmd)
	cmd.Flags().StringVarP(&opts.file, "filename", "f", "", "read bindings from a YAML or JSON file (- for standard input) instead of the cluster")
	cmd.Flags().StringVar(&opts.repo, "repo", "", "local repository to audit against (default: clone each binding's spec.source.repository)")
	cmd.Flags().StringVar(&opts.cacheDir, "cache-dir", "", "where clones are kept (default: the user cache directory)")
	cmd.Flags().StringVarP(&opts.output, "output", "o", outputTable, "output format: table, json or yaml")
	cmd.Flags().StringVar(&opts.sshKey, "ssh-key", "", "private key for SSH repositories, over the cluster's (password: $"+audit.EnvSSHKeyPassword+")")
	cmd.Flags().StringVar(&opts.knownHosts, "known-hosts", "", "known_hosts file for SSH repositories, over the cluster's (default: the cluster's, else ~/.ssh/known_hosts)")
	cmd.Flags().StringArrayVar(&opts.credentialsFor, "credentials-for", nil,
		"[SCHEME://]HOST[:PORT][/PATH-PREFIX] the credentials of --ssh-key and $GIT_* are sent to (repeatable; also $"+audit.EnvCredentialsFor+", comma-separated)")
	cmd.Flags().BoolVar(&opts.allowInsecureCredentials, "allow-insecure-credentials", false, "send $GIT_* credentials over plain http to the repositories --credentials-for names")
	cmd.Flags().StringVar(&opts.argoNamespace, "argocd-namespace", provenance.DefaultArgoCDNamespace,
		"Argo CD's own namespace, where it keeps repository Secrets, known hosts and TLS certificates")
	cmd.Flags().StringSliceVar(&opts.allowDeclaredHosts, "allow-declared-host", nil,
		"host a Declared binding's repository may be cloned from, besides the hosts of the cluster's Flux sources and Argo CD Applications (repeatable)")
	cmd.Flags().BoolVar(&opts.requireAttested, "require-attested", false,
		"exit with status 4 when a binding's revision is Declared or Unattested rather than attested by Flux or Argo CD")
	cmd.Flags().BoolVar(&opts.requireVerified, "require-verified", false, "exit with status 4 when a binding is not Verified")
	return cmd
}

func runAudit(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, opts auditOptions, names []string) error {
	if opts.output != outputTable && opts.output != outputJSON && opts.output != outputYAML {
		return usageErrorf("unknown output format %q: use table, json or yaml", opts.output)
	}
	if opts.file != "" && len(names) > 0 {
		return usageErrorf("name bindings or read them from -f, not both")
	}
	if err := allowedHostsFlag(opts.allowDeclaredHosts); err != nil {
		return err
	}
	repos, err := repositoryOptions(opts, os.Getenv)
	if err != nil {
		return err
	}
	var c client.Client
	namespace := ""
	if opts.file == "" {
		if c, namespace, err = opts.kube.client(); err != nil {
			return err
		}
	}
	bindings, err := loadBindings(ctx, stdin, c, namespace, opts, names)
	if err != nil {
		return err
	}
	if c != nil && repos.Path == "" {
		cluster := &clusterCredentials{client: c, argoNamespace: opts.argoNamespace}
		repos.Lookup = warnOnce(stderr, cluster.lookup)
	}
	repos.FromCluster = c != nil
	warnUnscoped(stderr, repos.Given)
	hosts := hostsForDeclared(ctx, stderr, c, repos, bindings, opts.allowDeclaredHosts)
	bar := newProgress(stderr)
	results := audit.All(ctx, repos, bindings, audit.Options{Progress: bar.update, DeclaredHosts: hosts})
	bar.finish()
	warnUnmatched(stderr, repos.Given)
	if err := printResults(stdout, opts.output, results); err != nil {
		return err
	}
	if audit.AnyMismatch(results) {
		return ErrMismatch
	}
	return gate(opts, results)
}

// loadBindings reads bindings from -f, else from the cluster through c.
func loadBindings(ctx context.Context, stdin io.Reader, c client.Client, namespace string, opts auditOptions, names []string) ([]embedopsv1.ModelCacheBinding, error) {
	if opts.file != "" {
		data, err := readInput(stdin, opts.file)
		if err != nil {
			return nil, err
		}
		return bindingsFromYAML(data)
	}
	return bindingsFromCluster(ctx, c, namespace, names)
}

// repositoryOptions turns the flags and the environment into where
// repositories come from and the credentials that override the cluster's.
func repositoryOptions(opts auditOptions, getenv func(string) string) (audit.RepositoryOptions, error) {
	given, err := givenCredentials(opts, getenv)
	if err != nil {
		return audit.RepositoryOptions{}, err
	}
	repos := audit.RepositoryOptions{Path: opts.repo, CacheDir: opts.cacheDir, Given: given}
	if repos.CacheDir == "" { // with --repo too: included repositories are cloned
		dir, err := audit.DefaultCacheDir()
		if err != nil {
			return repos, err
		}
		repos.CacheDir = dir
	}
	return repos, nil
}

// printResults writes the results as an aligned table or structured data.
func printResults(out io.Writer, format string, results []audit.Result) error {
	if format != outputTable {
		return printStructured(out, format, results)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BINDING\tRESULT\tSOURCE\tRECORDED\tORIGIN\tAUTHOR\tDATE\tSUBJECT / DETAIL")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Binding, r.Result, r.Attestation, short(r.RecordedCommit),
			short(r.OriginCommit), r.OriginAuthor, r.OriginDate, detail(r))
	}
	return w.Flush()
}

// detail is the last column: the subject when Verified, else what is wrong.
func detail(r audit.Result) string {
	switch {
	case len(r.Differences) > 0:
		text := r.Differences[0].String()
		if more := len(r.Differences) - 1; more > 0 {
			text += fmt.Sprintf(" (+%d more)", more)
		}
		return text
	case r.Result == audit.Verified:
		return r.OriginSubject
	default:
		return r.Reason
	}
}

// short abbreviates a commit as git does.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// progress draws a bar on stderr only for walks longer than the threshold.
type progress struct {
	out io.Writer
	bar *progressbar.ProgressBar
}

func newProgress(out io.Writer) *progress { return &progress{out: out} }

func (p *progress) update(done, total int) {
	if total < progressThreshold {
		return
	}
	if p.bar == nil || p.bar.GetMax() != total {
		p.finish()
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.out), progressbar.OptionSetDescription("walking history"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	}
	_ = p.bar.Set(done)
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}
