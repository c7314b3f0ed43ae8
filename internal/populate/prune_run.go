package populate

// pruneAllBut makes room for commit, whose files are listing, when the run
// was asked to (Prune) and holds the model's folder alone (enterFolder):
// every complete snapshot goes but keptCommits, and the blobs the listing
// names stay, to be linked again (planPruning). A listing that names a
// file without its blob (a hub mirror's) cannot say which blobs the commit
// wants, so nothing is pruned then.
func (p *populator) pruneAllBut(commit string, listing []remoteFile) error {
	if !p.prune {
		return nil
	}
	if !p.alone {
		p.log.Warn("not pruning: the model folder cannot be locked against other populators", "model", p.model, "commit", commit)
		return nil
	}
	wanted, ok := blobsOf(listing)
	if !ok {
		p.log.Info("not pruning: the hub listed files without their blobs", "model", p.model, "commit", commit)
		return nil
	}
	plan, err := p.cache.planPruning(p.keptCommits(commit), wanted)
	if err != nil || len(plan.commits) == 0 {
		return err
	}
	if err := p.cache.prune(plan); err != nil {
		return err
	}
	p.log.Info("pruned older revisions", "model", p.model, "commits", plan.commits, "blobs", len(plan.blobs), "freedBytes", plan.bytes)
	return nil
}

// keptCommits are the snapshots a run fetching commit keeps: commit, and
// the one the last run left (lastLeft), which the claim's pod served and a
// rollback returns to, whether or not it is commit.
func (p *populator) keptCommits(commit string) []string {
	return append([]string{commit}, p.cache.lastLeft(commit)...)
}

// blobsOf are the blobs listing names, and whether it names every file's.
func blobsOf(listing []remoteFile) (map[string]bool, bool) {
	blobs := make(map[string]bool, len(listing))
	for _, f := range listing {
		if f.blob == "" {
			return nil, false
		}
		blobs[f.blob] = true
	}
	return blobs, true
}
