package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// traceOptions are the flags of `embedops trace`.
type traceOptions struct {
	kube   kubeOptions
	output string
}

// serverTrace is the chain from a server to the commits of its decisions.
type serverTrace struct {
	Server   string         `json:"server"`
	Phase    string         `json:"phase,omitempty"`
	Model    string         `json:"model"`
	Bindings []bindingTrace `json:"bindings"`
}

// bindingTrace is one binding of a server, in use or kept as a record.
type bindingTrace struct {
	Name     string                    `json:"name"`
	Phase    string                    `json:"phase,omitempty"`
	InUse    bool                      `json:"inUse"`
	Mode     embedopsv1.CacheMode      `json:"mode"`
	Size     string                    `json:"size"`
	Class    string                    `json:"storageClassName,omitempty"`
	Digest   string                    `json:"digest"`
	Claims   []claimTrace              `json:"claims"`
	Source   embedopsv1.DecisionSource `json:"source"`
	Realized *embedopsv1.RealizedCache `json:"realized,omitempty"`
}

// claimTrace is one cache claim and the volume bound to it.
type claimTrace struct {
	Name   string `json:"name"`
	Phase  string `json:"phase"`
	Volume string `json:"volume,omitempty"`
	// Existing marks the user's spec.cache.existingClaim: recorded, not
	// owned, never deleted.
	Existing bool `json:"existing,omitempty"`
}

func newTraceCommand() *cobra.Command {
	opts := traceOptions{}
	cmd := &cobra.Command{
		Use:   "trace [NAMESPACE/]SERVER",
		Short: "Show a server's bindings, their claims and volumes, and the commits that decided them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTrace(cmd.Context(), cmd.OutOrStdout(), opts, args[0])
		},
	}
	opts.kube.bind(cmd)
	cmd.Flags().StringVarP(&opts.output, "output", "o", outputTable, "output format: table, json or yaml")
	return cmd
}

func runTrace(ctx context.Context, out io.Writer, opts traceOptions, target string) error {
	if opts.output != outputTable && opts.output != outputJSON && opts.output != outputYAML {
		return usageErrorf("unknown output format %q: use table, json or yaml", opts.output)
	}
	if opts.kube.allNamespaces {
		return usageErrorf("trace takes one server: name its namespace with -n or NAMESPACE/SERVER")
	}
	if namespace, name, found := strings.Cut(target, "/"); found {
		opts.kube.namespace, target = namespace, name
	}
	c, namespace, err := opts.kube.client()
	if err != nil {
		return err
	}
	trace, err := traceServer(ctx, c, client.ObjectKey{Namespace: namespace, Name: target})
	if err != nil {
		return err
	}
	if opts.output != outputTable {
		return printStructured(out, opts.output, trace)
	}
	printTrace(out, trace)
	return nil
}

// traceServer follows a server to its bindings, claims and volumes.
func traceServer(ctx context.Context, c client.Client, key client.ObjectKey) (*serverTrace, error) {
	server := &embedopsv1.EmbeddingServer{}
	if err := c.Get(ctx, key, server); err != nil {
		return nil, fmt.Errorf("reading EmbeddingServer %s: %w", key, err)
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := c.List(ctx, &bindings, client.InNamespace(key.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ModelCacheBindings: %w", err)
	}
	trace := &serverTrace{Server: key.String(), Phase: string(server.Status.Phase), Model: server.Spec.Model.Name + "@" + server.Spec.Model.Revision}
	for i := range bindings.Items {
		binding := &bindings.Items[i]
		inUse := references(binding, server)
		if !inUse && binding.Labels[embedopsv1.ServerUIDLabel] != string(server.UID) {
			continue
		}
		traced, err := traceBinding(ctx, c, binding, inUse)
		if err != nil {
			return nil, err
		}
		trace.Bindings = append(trace.Bindings, traced)
	}
	return trace, nil
}

// references reports whether binding lists server among its users.
func references(binding *embedopsv1.ModelCacheBinding, server *embedopsv1.EmbeddingServer) bool {
	for _, ref := range binding.Status.RequestReferences {
		if ref.UID == server.UID {
			return true
		}
	}
	return false
}

func traceBinding(ctx context.Context, c client.Client, binding *embedopsv1.ModelCacheBinding, inUse bool) (bindingTrace, error) {
	d := binding.Spec.Decision
	traced := bindingTrace{
		Name: binding.Name, Phase: string(binding.Status.Phase), InUse: inUse, Mode: d.Mode, Size: d.Size.String(),
		Class: d.StorageClassName, Digest: d.Digest, Source: binding.Spec.Source, Realized: binding.Status.Realized,
	}
	names := binding.Spec.Resources.PersistentVolumeClaimNames
	if d.ExistingClaim != "" {
		names = append(slices.Clone(names), d.ExistingClaim)
	}
	for _, name := range names {
		existing := name == d.ExistingClaim
		claim := &corev1.PersistentVolumeClaim{}
		err := c.Get(ctx, client.ObjectKey{Namespace: binding.Namespace, Name: name}, claim)
		switch {
		case apierrors.IsNotFound(err):
			traced.Claims = append(traced.Claims, claimTrace{Name: name, Phase: "Absent", Existing: existing})
		case err != nil:
			return traced, fmt.Errorf("reading claim %s/%s: %w", binding.Namespace, name, err)
		default:
			traced.Claims = append(traced.Claims, claimTrace{Name: name, Phase: string(claim.Status.Phase), Volume: claim.Spec.VolumeName, Existing: existing})
		}
	}
	return traced, nil
}

// printTrace draws the chain as an indented tree.
func printTrace(out io.Writer, trace *serverTrace) {
	fmt.Fprintf(out, "EmbeddingServer %s  %s  %s\n", trace.Server, trace.Phase, trace.Model)
	if len(trace.Bindings) == 0 {
		fmt.Fprintln(out, "└─ no ModelCacheBinding (cache.mode None, or not reconciled yet)")
	}
	for i, b := range trace.Bindings {
		branch, indent := "├─", "│  "
		if i == len(trace.Bindings)-1 {
			branch, indent = "└─", "   "
		}
		use := "record"
		if b.InUse {
			use = "in use"
		}
		class := b.Class
		switch {
		case slices.ContainsFunc(b.Claims, func(c claimTrace) bool { return c.Existing }):
			class = "(existing claim)"
		case class == "":
			class = "(default class)"
		}
		fmt.Fprintf(out, "%s ModelCacheBinding %s  %s, %s  %s %s %s\n", branch, b.Name, b.Phase, use, b.Mode, b.Size, class)
		for _, claim := range b.Claims {
			note := ""
			if claim.Existing {
				note = "  (existingClaim: not owned, never deleted)"
			}
			fmt.Fprintf(out, "%s├─ claim %s  %s  volume %s%s\n", indent, claim.Name, claim.Phase, orNone(claim.Volume), note)
		}
		fmt.Fprintf(out, "%s└─ source %s%s  revision %s\n", indent, b.Source.Method, objectRef(b.Source.ObjectRef), orNone(b.Source.Revision))
		if b.Source.Commit != "" {
			fmt.Fprintf(out, "%s   └─ commit %s in %s at %s (decided %s)\n", indent, b.Source.Commit, orNone(b.Source.Repository),
				orNone(b.Source.Path), b.Source.DecidedAt.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
}

func objectRef(ref *embedopsv1.SourceObjectReference) string {
	if ref == nil {
		return ""
	}
	return fmt.Sprintf(" %s %s/%s", ref.Kind, ref.Namespace, ref.Name)
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
