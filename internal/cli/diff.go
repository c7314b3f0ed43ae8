package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/internal/decision"
)

// ErrRetires is returned with --fail-on-retire when a change retires a
// cache; the command exits with status ExitRetires for it.
var ErrRetires = errors.New("the change releases cached data (--fail-on-retire)")

// ExitRetires is the exit status of ErrRetires.
const ExitRetires = 3

// outputMarkdown prints a table ready to post on a pull request.
const outputMarkdown = "markdown"

// Values of --cluster.
const (
	clusterAuto = "auto"
	clusterOn   = "on"
	clusterOff  = "off"
)

// clusterTimeout bounds each request diff makes to the cluster.
const clusterTimeout = 10 * time.Second

// diffOptions are the flags of `embedops diff`.
type diffOptions struct {
	kustomization string
	application   string
	repo          string
	cacheDir      string
	sshKey        string
	knownHosts    string
	from          string
	to            string
	namespace     string
	output        string
	failOnRetire  bool
	cluster       string
	bindings      string
	kubeconfig    string
	context       string

	// allowInsecureCredentials sends $GIT_* credentials to an http:// --repo.
	allowInsecureCredentials bool
}

// diffRevision is one side of a change: the revision asked for and the
// commit it names.
type diffRevision struct {
	Revision string `json:"revision"`
	Commit   string `json:"commit"`
}

// diffReport is what diff prints.
type diffReport struct {
	Repository string       `json:"repository"`
	From       diffRevision `json:"from"`
	To         diffRevision `json:"to"`
	// Sizes says where model sizes come from, or why they are unknown.
	Sizes   string                  `json:"sizes"`
	Servers []decision.ServerChange `json:"servers"`
	Summary diffSummary             `json:"summary"`
}

// diffSummary counts the distinct decisions of each action.
type diffSummary struct {
	Create              int      `json:"create"`
	Keep                int      `json:"keep"`
	KeepLifetimeChanged int      `json:"keepLifetimeChanged"`
	KeepExpanded        int      `json:"keepExpanded"`
	KeepRevised         int      `json:"keepRevised"`
	Retire              int      `json:"retire"`
	Rolls               []string `json:"rolls"`
	// DownloadBytes is the total download, nil when any part is unknown.
	DownloadBytes *int64 `json:"downloadBytes"`
}

func newDiffCommand() *cobra.Command {
	opts := diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff --from REV [--to REV] (--kustomization FILE | --application FILE)",
		Short: "Show what a change does to cache decisions: created, kept and retired caches, and the servers that roll",
		Long: "diff renders the servers the Flux Kustomization or Argo CD Application in FILE applies from two\n" +
			"revisions of --repo, as decide does, and lists per server the cache decisions the change creates,\n" +
			"keeps and retires, with the retainFor after which retired data is released, the bytes to download\n" +
			"(known when a binding of the same model and revision in the cluster, or in --bindings, records\n" +
			"status.realized) and the servers whose pods roll onto other cache storage. A change of retainFor\n" +
			"alone keeps the cache: its new binding takes over the claims, and the server does not roll; so\n" +
			"does a larger size (the claims are expanded in place, if the StorageClass allows it) and a new\n" +
			"model revision (the pods roll in place, if the claims have room for another revision, as their\n" +
			"binding's status.realized records it, and a replica may be\n" +
			"unavailable); a condition the plan cannot check is printed under the table.\n" +
			"Exit status 3 with --fail-on-retire means the change releases cached data.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDiff(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.kustomization, "kustomization", "", "a Flux Kustomization whose path to render")
	cmd.Flags().StringVar(&opts.application, "application", "", "an Argo CD Application whose source to render")
	cmd.Flags().StringVar(&opts.repo, "repo", ".", "the repository: a local path, or a URL to clone (credentials from $GIT_BEARER_TOKEN, $GIT_TOKEN or $GIT_USERNAME/$GIT_PASSWORD, sent to this URL only)")
	cmd.Flags().StringVar(&opts.cacheDir, "cache-dir", "", "where clones are kept (default: the user cache directory)")
	cmd.Flags().StringVar(&opts.sshKey, "ssh-key", "", "private key for an SSH --repo (password: $"+audit.EnvSSHKeyPassword+")")
	cmd.Flags().StringVar(&opts.knownHosts, "known-hosts", "", "known_hosts file for an SSH --repo (default: ~/.ssh/known_hosts)")
	cmd.Flags().BoolVar(&opts.allowInsecureCredentials, "allow-insecure-credentials", false, "send $GIT_* credentials to an http:// --repo")
	cmd.Flags().StringVar(&opts.from, "from", "", "the commit, branch or tag before the change")
	cmd.Flags().StringVar(&opts.to, "to", "HEAD", "the commit, branch or tag after the change")
	cmd.Flags().StringVarP(&opts.namespace, "namespace", "n", "default", "namespace of servers that name none")
	cmd.Flags().StringVarP(&opts.output, "output", "o", outputTable, "output format: table, json or markdown")
	cmd.Flags().BoolVar(&opts.failOnRetire, "fail-on-retire", false, "exit with status 3 when the change releases cached data")
	cmd.Flags().StringVar(&opts.cluster, "cluster", clusterAuto, "read model sizes from the cluster's bindings: auto (when a kubeconfig is found), on or off")
	cmd.Flags().StringVar(&opts.bindings, "bindings", "", "read model sizes from bindings in a YAML or JSON file (kubectl get mcb -A -o yaml) instead of the cluster")
	cmd.Flags().StringVar(&opts.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&opts.context, "context", "", "kubeconfig context to use")
	cmd.MarkFlagsOneRequired("kustomization", "application")
	cmd.MarkFlagsMutuallyExclusive("kustomization", "application")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

func runDiff(ctx context.Context, stdout, stderr io.Writer, opts diffOptions) error {
	if err := checkDiffOptions(opts); err != nil {
		return err
	}
	obj, err := readGitOpsObject(opts.kustomization, opts.application)
	if err != nil {
		return err
	}
	repo, repos, err := openDiffRepository(ctx, opts)
	if err != nil {
		return err
	}
	report := &diffReport{Repository: repositoryName(repos), From: diffRevision{Revision: opts.from}, To: diffRevision{Revision: opts.to}}
	before, err := serversAt(ctx, repo, repos, obj, &report.From, opts.namespace)
	if err != nil {
		return err
	}
	after, err := serversAt(ctx, repo, repos, obj, &report.To, opts.namespace)
	if err != nil {
		return err
	}
	var known []embedopsv1.ModelCacheBinding
	known, report.Sizes, err = knownBindings(ctx, stderr, opts, after)
	if err != nil {
		return err
	}
	// The plan reads no StorageClass: a larger size is expanded in place
	// on the condition its CacheChange states.
	plan, err := decision.NewPlan(before, after, decision.Facts{Bindings: known, AllowedUnavailable: builder.AllowedUnavailable})
	if err != nil {
		return err
	}
	report.Servers = plan.Servers
	report.Summary = summaryOf(plan)
	if err := printDiff(stdout, opts.output, report); err != nil {
		return err
	}
	if opts.failOnRetire && plan.Retires() {
		return ErrRetires
	}
	return nil
}

// checkDiffOptions refuses flag values diff does not know.
func checkDiffOptions(opts diffOptions) error {
	if !slices.Contains([]string{outputTable, outputJSON, outputMarkdown}, opts.output) {
		return usageErrorf("unknown output format %q: use table, json or markdown", opts.output)
	}
	if !slices.Contains([]string{clusterAuto, clusterOn, clusterOff}, opts.cluster) {
		return usageErrorf("unknown --cluster %q: use auto, on or off", opts.cluster)
	}
	if opts.bindings != "" && opts.cluster == clusterOn {
		return usageErrorf("read bindings from --bindings or --cluster=on, not both")
	}
	return nil
}

// openDiffRepository opens --repo: a local repository, or a clone of a URL
// kept in the cache directory. It returns the repository and where it came
// from.
func openDiffRepository(ctx context.Context, opts diffOptions) (*git.Repository, audit.RepositoryOptions, error) {
	endpoint, err := transport.NewEndpoint(opts.repo)
	if err != nil || endpoint.Protocol == "file" {
		repos := audit.RepositoryOptions{Path: opts.repo}
		repo, err := audit.OpenRepository(ctx, repos)
		return repo, repos, err
	}
	repos, err := repositoryOptions(auditOptions{cacheDir: opts.cacheDir, sshKey: opts.sshKey, knownHosts: opts.knownHosts,
		allowInsecureCredentials: opts.allowInsecureCredentials}, os.Getenv)
	if err != nil {
		return nil, repos, err
	}
	repos.URL = opts.repo
	if repos.Credentials, err = diffCredentials(repos.Given, opts.repo); err != nil {
		return nil, repos, err
	}
	repo, err := audit.OpenRepository(ctx, repos)
	return repo, repos, err
}

// serversAt renders the servers the object applies at a revision and
// records the commit the revision names. A commit without the object's path
// has no servers.
func serversAt(ctx context.Context, repo *git.Repository, repos audit.RepositoryOptions, obj *gitOpsObject, rev *diffRevision, defaultNamespace string) ([]*embedopsv1.EmbeddingServer, error) {
	commit, err := resolveCommit(ctx, repo, repos, rev.Revision)
	if err != nil {
		return nil, err
	}
	rev.Commit = commit
	resources, namespace, err := obj.render(repo, commit)
	if errors.Is(err, audit.ErrPathNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if namespace == "" {
		namespace = defaultNamespace
	}
	servers, err := decision.ServersFromYAML(resources, namespace)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", obj.file, commit[:12], err)
	}
	return servers, nil
}

// knownBindings are the bindings whose status.realized gives model sizes:
// from --bindings, or from the cluster as --cluster says. It also returns
// where sizes come from. With --cluster=auto a cluster that cannot be
// reached is a warning on stderr, and sizes are unknown.
func knownBindings(ctx context.Context, stderr io.Writer, opts diffOptions, servers []*embedopsv1.EmbeddingServer) ([]embedopsv1.ModelCacheBinding, string, error) {
	if opts.bindings != "" {
		data, err := readFile(opts.bindings)
		if err != nil {
			return nil, "", err
		}
		bindings, err := bindingsFromYAML(data)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", opts.bindings, err)
		}
		return bindings, "bindings in " + opts.bindings, nil
	}
	if opts.cluster == clusterOff {
		return nil, "unknown: --cluster=off", nil
	}
	c, found, err := diffClient(opts)
	if err == nil && found {
		var bindings []embedopsv1.ModelCacheBinding
		if bindings, err = clusterBindings(ctx, c, servers); err == nil {
			return bindings, "bindings in the cluster", nil
		}
	}
	switch {
	case opts.cluster == clusterOn && err != nil:
		return nil, "", err
	case opts.cluster == clusterOn:
		return nil, "", errors.New("--cluster=on: no kubeconfig found")
	case err != nil:
		fmt.Fprintf(stderr, "embedops diff: model sizes unknown: %v\n", err)
		return nil, "unknown: the cluster cannot be read", nil
	default:
		return nil, "unknown: no kubeconfig", nil
	}
}

// diffClient is a client for the kubeconfig's cluster; found is false when
// there is no kubeconfig at all.
func diffClient(opts diffOptions) (client.Client, bool, error) {
	kube := kubeOptions{kubeconfig: opts.kubeconfig, context: opts.context}
	config, err := kube.clientConfig().ClientConfig()
	if opts.kubeconfig == "" && opts.context == "" && clientcmd.IsEmptyConfig(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	config.Timeout = clusterTimeout
	scheme, err := controller.NewScheme()
	if err != nil {
		return nil, true, err
	}
	c, err := client.New(config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, true, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return c, true, nil
}

// clusterBindings lists the bindings of every namespace, or, where that is
// forbidden, of the servers' namespaces.
func clusterBindings(ctx context.Context, c client.Client, servers []*embedopsv1.EmbeddingServer) ([]embedopsv1.ModelCacheBinding, error) {
	all, err := bindingsFromCluster(ctx, c, "", nil)
	if !apierrors.IsForbidden(err) {
		return all, err
	}
	var namespaces []string
	for _, server := range servers {
		if !slices.Contains(namespaces, server.Namespace) {
			namespaces = append(namespaces, server.Namespace)
		}
	}
	var bindings []embedopsv1.ModelCacheBinding
	for _, namespace := range namespaces {
		found, err := bindingsFromCluster(ctx, c, namespace, nil)
		if err != nil {
			return nil, err
		}
		bindings = append(bindings, found...)
	}
	return bindings, nil
}

// summaryOf counts the plan's distinct decisions by action and adds up the
// downloads.
func summaryOf(plan *decision.Plan) diffSummary {
	summary := diffSummary{Rolls: []string{}, DownloadBytes: new(int64(0))}
	seen := map[decision.Action]map[string]bool{}
	for _, server := range plan.Servers {
		if server.Rolls {
			summary.Rolls = append(summary.Rolls, server.Server)
		}
		for _, c := range server.Caches {
			summary.add(c, seen)
		}
	}
	return summary
}

// add counts a decision once per action and adds its download.
func (s *diffSummary) add(c decision.CacheChange, seen map[decision.Action]map[string]bool) {
	bytes := c.Download.Bytes()
	if bytes == nil || s.DownloadBytes == nil {
		s.DownloadBytes = nil
	} else {
		*s.DownloadBytes += *bytes
	}
	if seen[c.Action] == nil {
		seen[c.Action] = map[string]bool{}
	}
	if seen[c.Action][c.Binding] {
		return
	}
	seen[c.Action][c.Binding] = true
	switch c.Action {
	case decision.ActionCreate:
		s.Create++
	case decision.ActionKeep:
		s.Keep++
	case decision.ActionKeepLifetimeChanged:
		s.KeepLifetimeChanged++
	case decision.ActionKeepExpanded:
		s.KeepExpanded++
	case decision.ActionKeepRevised:
		s.KeepRevised++
	case decision.ActionRetire:
		s.Retire++
	}
}
