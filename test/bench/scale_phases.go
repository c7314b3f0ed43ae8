package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/embedops/embedops/test/fixtures"
)

// converge creates the servers and measures until all are Ready and bound.
func (s *scaleRun) converge(ctx context.Context) error {
	var err error
	if s.namespace, err = s.env.CreateNamespace(ctx, "bench-servers-"); err != nil {
		return err
	}
	before, err := s.env.Count(s.namespace)
	if err != nil {
		return err
	}
	startCPU, err := s.env.Controller.CPUSeconds()
	if err != nil {
		return err
	}
	if s.clientTimes, err = s.env.clientTimes(ctx); err != nil {
		return err
	}
	started := time.Now()
	if err := s.env.CreateServers(ctx, s.namespace, s.opts.Servers); err != nil {
		return err
	}
	if err := s.env.WaitConverged(ctx, s.namespace, s.opts.Servers, s.opts.Timeout); err != nil {
		return err
	}
	wall := time.Since(started).Seconds()
	endCPU, err := s.env.Controller.CPUSeconds()
	if err != nil {
		return err
	}
	s.report.setConvergence(wall, endCPU-startCPU)
	if err := s.reconcileTimes(ctx); err != nil {
		return err
	}
	if err := s.limiterShare(ctx); err != nil {
		return err
	}
	if s.created, err = s.env.settledCount(ctx, s.namespace, s.opts.Timeout); err != nil {
		return err
	}
	s.report.setCreation(Since(before, s.created))
	return nil
}

// clientTimes are the seconds the controller's requests so far waited for
// its client's rate limiter, and took once sent.
type clientTimes struct {
	waited, sent float64
}

// clientTimes reads the controller's clientTimes.
func (e *Env) clientTimes(ctx context.Context) (clientTimes, error) {
	families, err := e.Controller.Metrics(ctx, limiterWaitMetric, requestTimeMetric)
	if err != nil {
		return clientTimes{}, err
	}
	return clientTimes{waited: histogramSum(families, limiterWaitMetric), sent: histogramSum(families, requestTimeMetric)}, nil
}

// limiterShare reports the share of the controller's request time during
// convergence spent waiting for its client's rate limiter.
func (s *scaleRun) limiterShare(ctx context.Context) error {
	end, err := s.env.clientTimes(ctx)
	if err != nil {
		return err
	}
	s.report.setLimiter(end.waited-s.clientTimes.waited, end.sent-s.clientTimes.sent)
	return nil
}

// reconcileTimes reads the EmbeddingServer reconcile time quantiles.
func (s *scaleRun) reconcileTimes(ctx context.Context) error {
	families, err := s.env.Controller.Metrics(ctx)
	if err != nil {
		return err
	}
	h, err := histogram(families, reconcileTimeMetric, "controller", serverController)
	if err != nil {
		return err
	}
	s.report.Reconciles = int(h.GetSampleCount())
	s.report.ReconcileP50 = round(Quantile(h, 0.5))
	s.report.ReconcileP99 = round(Quantile(h, 0.99))
	return nil
}

// resync asks every server for opts.Resyncs reconciles, one round at a
// time, and counts the controller's writes meanwhile.
func (s *scaleRun) resync(ctx context.Context) error {
	after, err := s.resyncRounds(ctx, "bench")
	if err != nil {
		return err
	}
	s.report.setSteadyState(Since(s.created, after))
	return nil
}

// resyncRounds asks every server for opts.Resyncs reconciles, one round at
// a time with tokens <prefix>-<round>, and returns the controller's
// requests once they settled.
func (s *scaleRun) resyncRounds(ctx context.Context, prefix string) (Counts, error) {
	for round := range s.opts.Resyncs {
		if err := s.env.Resync(ctx, s.namespace, s.opts.Servers, fmt.Sprintf("%s-%d", prefix, round), s.opts.Timeout); err != nil {
			return Counts{}, err
		}
	}
	return s.env.settledCount(ctx, s.namespace, s.opts.Timeout)
}

// history adds the Released records to the servers' namespace, asks every
// server for opts.Resyncs reconciles again and counts the requests per
// reconcile, to compare with resync's.
func (s *scaleRun) history(ctx context.Context) error {
	if err := fixtures.CreateReleasedRecords(ctx, s.env.Client, s.namespace, s.opts.ReleasedRecords); err != nil {
		return err
	}
	// The records' own reconciles end before the count starts.
	before, err := s.env.settledCount(ctx, s.namespace, s.opts.Timeout)
	if err != nil {
		return err
	}
	after, err := s.resyncRounds(ctx, "history")
	if err != nil {
		return err
	}
	s.report.setHistory(s.opts.ReleasedRecords, Since(before, after))
	return nil
}

// watchResync touches every server's StatefulSet opts.Resyncs times, one
// round at a time, each round until the controller has reconciled as many
// times as there are servers and its requests have settled, and counts its
// requests and reconciles meanwhile.
func (s *scaleRun) watchResync(ctx context.Context) error {
	before, err := s.env.Count(s.namespace)
	if err != nil {
		return err
	}
	start, err := s.env.Reconciles(ctx)
	if err != nil {
		return err
	}
	after := before
	for round := range s.opts.Resyncs {
		if err := s.env.TouchStatefulSets(ctx, s.namespace, s.opts.Servers, fmt.Sprintf("bench-%d", round), s.opts.Timeout); err != nil {
			return err
		}
		if after, err = s.env.settledCount(ctx, s.namespace, s.opts.Timeout); err != nil {
			return err
		}
	}
	end, err := s.env.Reconciles(ctx)
	if err != nil {
		return err
	}
	s.report.setWatchResync(Since(before, after), int(end-start))
	return nil
}

// rest measures the controller at rest with the servers only.
func (s *scaleRun) rest(ctx context.Context) error {
	rest, err := s.measureRest(ctx, "rest.pprof")
	if err != nil {
		return err
	}
	s.report.setRest(rest)
	return nil
}

// measureRest measures a rest window and adds the controller's writes
// about the servers' namespace in it to the rest writes. With a profile
// directory, a CPU profile of the window is written there as profile.
func (s *scaleRun) measureRest(ctx context.Context, profile string) (Rest, error) {
	before, err := s.env.Count(s.namespace)
	if err != nil {
		return Rest{}, err
	}
	profiled := make(chan error, 1)
	if s.opts.ProfileDir != "" {
		go func() { profiled <- s.env.Profile(ctx, s.opts.Rest, filepath.Join(s.opts.ProfileDir, profile)) }()
	} else {
		profiled <- nil
	}
	rest, err := s.env.MeasureRest(ctx, s.opts.Rest)
	if err = errors.Join(err, <-profiled); err != nil {
		return Rest{}, err
	}
	after, err := s.env.Count(s.namespace)
	if err != nil {
		return Rest{}, err
	}
	for resource, n := range Since(before, after).Writes {
		s.restWrites[resource] += n
	}
	s.report.setRestWrites(s.restWrites)
	return rest, nil
}

// unrelated creates the unrelated objects in a namespace of their own and
// measures the controller at rest again.
func (s *scaleRun) unrelated(ctx context.Context) error {
	namespace, err := s.env.CreateNamespace(ctx, "bench-unrelated-")
	if err != nil {
		return err
	}
	if err := s.env.CreateUnrelated(ctx, namespace, s.opts.UnrelatedPods, s.opts.Timeout); err != nil {
		return err
	}
	rest, err := s.measureRest(ctx, "rest-unrelated.pprof")
	if err != nil {
		return err
	}
	s.report.setRestWithUnrelated(rest)
	return nil
}
