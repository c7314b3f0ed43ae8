package watch

import (
	"fmt"
	"slices"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// LabelSelectorFlag is Flux's sharding flag, bound by
// fluxcd/pkg/runtime/controller.WatchOptions.
const LabelSelectorFlag = "watch-label-selector"

// BindFlags adds Flux's --watch-label-selector to fs, as
// fluxcd/pkg/runtime/controller.WatchOptions.BindFlags defines it. The
// other flags of WatchOptions (--watch-all-namespaces,
// --watch-configs-label-selector) are left out: embedops always watches
// every namespace and reads no ConfigMaps.
func BindFlags(fs *pflag.FlagSet, opts *runtimectrl.WatchOptions) {
	all := pflag.NewFlagSet("watch", pflag.ContinueOnError)
	opts.BindFlags(all)
	flag := all.Lookup(LabelSelectorFlag)
	flag.Usage = "Reconcile only the EmbeddingServers and ModelCacheBindings with matching labels, " +
		"e.g. '" + embedopsv1.ShardLabel + "=shard1' (Flux's sharding); a controller beside shards takes '!" + embedopsv1.ShardLabel + "'."
	fs.AddFlag(flag)
}

// Selector is the label selector of --watch-label-selector
// (fluxcd/pkg/runtime/controller.GetWatchSelector): everything when unset.
func Selector(opts runtimectrl.WatchOptions) (labels.Selector, error) {
	selector, err := runtimectrl.GetWatchSelector(opts)
	if err != nil {
		return nil, fmt.Errorf("parsing --%s %q: %w", LabelSelectorFlag, opts.LabelSelector, err)
	}
	return selector, nil
}

// ShardLeaderElectionID is the lease of the shard --watch-label-selector
// names: LeaderElectionID suffixed with a digest of the selector, as Flux's
// controllers derive theirs (kustomize-controller main.go,
// fluxcd/pkg/runtime/leaderelection.GenerateID), so every shard elects its
// own leader; LeaderElectionID itself without a selector.
func ShardLeaderElectionID(opts runtimectrl.WatchOptions) string {
	if opts.LabelSelector == "" {
		return LeaderElectionID
	}
	return leaderelection.GenerateID(LeaderElectionID, opts.LabelSelector)
}

// ShardKeys are the labels a binding copies from the server that creates
// it: embedopsv1.ShardLabel and every key selector names, so the binding
// matches the selector whenever its server does, and the binding controller
// of the server's shard, and no other, reconciles it.
func ShardKeys(selector labels.Selector) []string {
	keys := []string{embedopsv1.ShardLabel}
	requirements, _ := selector.Requirements()
	for _, requirement := range requirements {
		keys = append(keys, requirement.Key())
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// LeaderElectionID names the lease the controller replicas compete for;
// each shard's replicas compete for a lease of their own (ShardLeaderElectionID).
const LeaderElectionID = "embedops-controller-leader"
