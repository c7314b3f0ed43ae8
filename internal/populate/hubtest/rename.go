package hubtest

import "fmt"

// RenameCommit gives a model's commit another id, and points the branches
// that named it at the new one, so a stand-in hub can serve a manifest that
// pins a real commit id (examples/advanced.yaml).
func (h *Hub) RenameCommit(modelID, commit, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.models[modelID]
	if m == nil || m.commits[commit] == nil {
		return fmt.Errorf("model %s has no commit %s", modelID, commit)
	}
	if _, taken := m.commits[id]; taken {
		return fmt.Errorf("model %s already has a commit %s", modelID, id)
	}
	m.commits[id] = m.commits[commit]
	delete(m.commits, commit)
	for branch, c := range m.branches {
		if c == commit {
			m.branches[branch] = id
		}
	}
	return nil
}
