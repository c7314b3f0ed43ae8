package populate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// fillerName is the file under .embedops that names the pod whose run
// last left the cache complete (Options.Filler).
const fillerName = "filled-by"

// fillerPath is the file naming the cache's last filler.
func (c cacheRepo) fillerPath() string { return filepath.Join(c.root(), ".embedops", fillerName) }

// copiedFrom is the filler the cache records when it is not this run's: the
// claim is a copy of another replica's (a volume clone), and nothing that
// was copied is trusted as this replica's own run left it. "" for a cache
// of this filler, one without a record (filled before fillers were
// recorded), or a run without a Filler.
func (p *populator) copiedFrom() string {
	if p.filler == "" {
		return ""
	}
	data, err := os.ReadFile(p.cache.fillerPath())
	if err != nil {
		return ""
	}
	if recorded := strings.TrimSpace(string(data)); recorded != p.filler {
		return recorded
	}
	return ""
}

// trustNoCopy makes a run on a copied cache check every file's content
// against its manifest (VerifyFull, which downloads again what does not
// match) and report where the copy came from.
func (p *populator) trustNoCopy() {
	if from := p.copiedFrom(); from != "" {
		p.copied = from
		p.verify = VerifyFull
		p.log.Info("the cache is a copy of another replica's: every file is hashed against its manifest", "from", from)
	}
}

// recordFiller records this run's filler once the cache is complete.
func (p *populator) recordFiller() error {
	if p.filler == "" {
		return nil
	}
	if current, err := os.ReadFile(p.cache.fillerPath()); err == nil && string(current) == p.filler {
		return nil
	}
	if err := writeFile(p.cache.fillerPath(), []byte(p.filler)); err != nil {
		return fmt.Errorf("recording the cache's filler: %w", err)
	}
	return nil
}
