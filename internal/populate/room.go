package populate

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
