package populate

// pruneAllBut makes room for commit, whose files are listing, with Prune:
// every complete snapshot goes but commit and the one the last run left
// (lastLeft), which the pod before this one served and which a rollback
// returns to; blobs the listing names stay, to be linked again
// (planPruning).
func (p *populator) pruneAllBut(commit string, listing []remoteFile) error {
	if !p.prune {
		return nil
	}
	keep := append([]string{commit}, p.cache.lastLeft(commit)...)
	wanted := map[string]bool{}
	for _, f := range listing {
		wanted[f.blob] = f.blob != ""
	}
	plan, err := p.cache.planPruning(keep, wanted)
	if err != nil || len(plan.commits) == 0 {
		return err
	}
	if err := p.cache.prune(plan); err != nil {
		return err
	}
	p.log.Info("pruned older revisions", "model", p.model, "commits", plan.commits, "blobs", len(plan.blobs), "freedBytes", plan.bytes)
	return nil
}

// finish, with Prune, records the result's commit as the one this run
// left, and what room the cache has for the next commit: its free bytes
// and what pruning for the next commit frees. A run without Prune leaves
// the cache to others and reports neither.
func (p *populator) finish(result *Result) error {
	if !p.prune {
		return nil
	}
	if err := p.cache.writeLatest(result.ResolvedCommit); err != nil {
		return err
	}
	plan, err := p.cache.planPruning([]string{result.ResolvedCommit}, nil)
	if err != nil {
		return err
	}
	result.ReclaimableBytes = new(plan.bytes)
	if free, ok := freeBytes(p.cache.dir); ok {
		result.FreeBytes = new(free)
	}
	return nil
}
