package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// waitForServers polls until every server in namespace is Ready or the
// timeout passes.
func waitForServers(ctx context.Context, cluster *harness.Cluster, namespace string, timeout time.Duration) error {
	var waiting []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var listErr error
		waiting, listErr = notReady(ctx, cluster.Client, namespace)
		return listErr == nil && len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("not Ready after %s: %s: %w", timeout, strings.Join(waiting, ", "), err)
	}
	return nil
}

// notReady names the servers whose Ready condition is not True.
func notReady(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	var servers embedopsv1.EmbeddingServerList
	if err := c.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var waiting []string
	for i := range servers.Items {
		if !conditions.IsTrue(&servers.Items[i], embedopsv1.ReadyCondition) {
			waiting = append(waiting, servers.Items[i].Name)
		}
	}
	return waiting, nil
}

// printStatus prints servers and bindings as kubectl get would.
func printStatus(ctx context.Context, cluster *harness.Cluster, namespace string) error {
	var servers embedopsv1.EmbeddingServerList
	if err := cluster.Client.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
		return err
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := cluster.Client.List(ctx, &bindings, client.InNamespace(namespace)); err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nSERVER\tPHASE\tREADY\tMODEL\tBINDING\tREASON")
	for i := range servers.Items {
		s := &servers.Items[i]
		fmt.Fprintf(w, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", s.Name, s.Status.Phase, s.Status.ReadyReplicas, s.GetReplicas(),
			s.Spec.Model.Name, s.Status.CacheBinding, conditions.GetReason(s, embedopsv1.ReadyCondition))
	}
	fmt.Fprintln(w, "\nBINDING\tMODE\tCLASS\tPHASE\tREFERENCES\tCLAIMS")
	for i := range bindings.Items {
		b := &bindings.Items[i]
		names := make([]string, 0, len(b.Status.RequestReferences))
		for _, ref := range b.Status.RequestReferences {
			names = append(names, ref.Name)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", b.Name, b.Spec.Decision.Mode, b.Spec.Decision.StorageClassName,
			b.Status.Phase, strings.Join(names, ","), len(b.Spec.Resources.PersistentVolumeClaimNames))
	}
	return w.Flush()
}
