package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// notReady names the servers whose Ready condition is not True at their
// current generation.
func notReady(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	var servers embedopsv1.EmbeddingServerList
	if err := c.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	if len(servers.Items) == 0 {
		return []string{"(none applied yet)"}, nil
	}
	var waiting []string
	for i := range servers.Items {
		s := &servers.Items[i]
		if !conditions.IsTrue(s, embedopsv1.ReadyCondition) || s.Status.ObservedGeneration != s.Generation {
			waiting = append(waiting, s.Name)
		}
	}
	return waiting, nil
}

// printServers prints the servers as kubectl get would.
func printServers(ctx context.Context, out io.Writer, c client.Client, namespace string) error {
	var servers embedopsv1.EmbeddingServerList
	if err := c.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SERVER\tPHASE\tREADY\tMODEL\tBINDING")
	for i := range servers.Items {
		s := &servers.Items[i]
		fmt.Fprintf(w, "%s\t%s\t%d/%d\t%s\t%s\n", s.Name, s.Status.Phase, s.Status.ReadyReplicas, s.GetReplicas(),
			s.Spec.Model.Name, s.Status.CacheBinding)
	}
	return w.Flush()
}

// printBindings prints the bindings with the method and commit of their
// source; names, when given, picks which.
func printBindings(ctx context.Context, out io.Writer, c client.Client, namespace string, names ...string) error {
	var bindings embedopsv1.ModelCacheBindingList
	if err := c.List(ctx, &bindings, client.InNamespace(namespace)); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BINDING\tUSED BY\tMODE\tCLASS\tPHASE\tMETHOD\tCOMMIT\tCLAIMS")
	for i := range bindings.Items {
		b := &bindings.Items[i]
		if len(names) > 0 && !slices.Contains(names, b.Name) {
			continue
		}
		users := make([]string, 0, len(b.Status.RequestReferences))
		for _, ref := range b.Status.RequestReferences {
			users = append(users, ref.Name)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", b.Name, orNone(strings.Join(users, ",")), b.Spec.Decision.Mode,
			className(b.Spec.Decision.StorageClassName), b.Status.Phase, b.Spec.Source.Method, orNone(short(b.Spec.Source.Commit)),
			len(b.Spec.Resources.PersistentVolumeClaimNames))
	}
	return w.Flush()
}

// className shows the cluster's default StorageClass, which a decision
// records as no class, as "(default)".
func className(class string) string {
	if class == "" {
		return "(default)"
	}
	return class
}

// orNone shows an empty cell as a dash.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
