package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Profile writes a CPU profile of the controller over window to path, from
// its /debug/pprof/profile endpoint; the environment must have been started
// with EnvOptions.Profile. It blocks for the window.
func (e *Env) Profile(ctx context.Context, window time.Duration, path string) error {
	if e.pprofAddr == "" {
		return errors.New("the controller serves no pprof endpoint: start the environment with Profile")
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", e.pprofAddr, max(1, int(window.Round(time.Second).Seconds())))
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("asking for a CPU profile: %w", err)
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return fmt.Errorf("asking for a CPU profile: %w", err)
	}
	defer func() { _ = response.Body.Close() }()
	if response.StatusCode != http.StatusOK {
		return fmt.Errorf("asking for a CPU profile: %s", response.Status)
	}
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if _, err := io.Copy(file, response.Body); err != nil {
		_ = file.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return file.Close()
}
