package chart

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs `helm lint --strict` on the chart with its default values
// and with every optional object on: no message but the advice to add an
// icon, which embedops does not have.
func TestLint(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"default values": nil,
		"everything on":  everythingOn(),
		"no CRDs":        {"crds": map[string]any{"enabled": false}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			lint := action.NewLint()
			lint.Strict, lint.Namespace = true, namespace
			result := lint.Run([]string{filepath.Join(repoRoot, Dir)}, values)
			g.Expect(result.TotalChartsLinted).To(Equal(1))
			g.Expect(result.Errors).To(BeEmpty())
			g.Expect(messages(result.Messages)).To(ConsistOf("[INFO] Chart.yaml: icon is recommended"))
		})
	}
}

// everythingOn turns on every optional object.
func everythingOn() map[string]any {
	return map[string]any{
		"namespace": map[string]any{"create": true},
		"shards":    []any{"shard1"},
		"prometheus": map[string]any{
			"serviceMonitor": map[string]any{"enabled": true},
			"rule":           map[string]any{"enabled": true},
			"teiPodMonitor":  map[string]any{"enabled": true},
		},
	}
}

func messages(ms []support.Message) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Error())
	}
	return out
}

// TestSchemaRefuses renders values that contradict each other or are
// wrong: `helm template` fails, saying which value and why.
func TestSchemaRefuses(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		says   []string
	}{{
		name: "a ServiceMonitor without metrics",
		values: map[string]any{
			"metrics":    map[string]any{"enabled": false},
			"prometheus": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		},
		says: []string{"/prometheus/serviceMonitor/enabled': value must be false", "/metrics/enabled': value must be true"},
	}, {
		name: "replicas without leader election",
		values: map[string]any{
			"replicaCount":   2,
			"leaderElection": map[string]any{"enabled": false},
		},
		says: []string{"/replicaCount': maximum: got 2, want 1", "/leaderElection/enabled': value must be true"},
	}, {
		name: "a populator image with the populator off",
		values: map[string]any{
			"populator": map[string]any{"enabled": false, "image": "example.com/populator:v1"},
		},
		says: []string{"/populator/image': maxLength", "/populator/enabled': value must be true"},
	}, {
		name:   "an empty image repository",
		values: map[string]any{"image": map[string]any{"repository": ""}},
		says:   []string{"/image/repository': minLength: got 0, want 1"},
	}, {
		name:   "an unknown pull policy",
		values: map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}},
		says:   []string{"/image/pullPolicy", "Always", "IfNotPresent", "Never"},
	}, {
		name:   "an argument that is no flag",
		values: map[string]any{"extraArgs": []any{"concurrent=8"}},
		says:   []string{"/extraArgs/0': 'concurrent=8' does not match pattern"},
	}, {
		name:   "an unknown log level",
		values: map[string]any{"log": map[string]any{"level": "verbose"}},
		says:   []string{"/log/level': value must be one of"},
	}, {
		name:   "a misspelt value",
		values: map[string]any{"nodeselector": map[string]any{"disk": "ssd"}},
		says:   []string{"additional properties 'nodeselector' not allowed"},
	}, {
		name:   "a shard name that is no DNS label",
		values: map[string]any{"shards": []any{"Shard_1"}},
		says:   []string{"/shards/0': 'Shard_1' does not match pattern"},
	}, {
		name:   "a shard listed twice",
		values: map[string]any{"shards": []any{"shard1", "shard1"}},
		says:   []string{"/shards': items at 0 and 1 are equal"},
	}, {
		name:   "a port out of range",
		values: map[string]any{"metrics": map[string]any{"port": 70000}},
		says:   []string{"/metrics/port': maximum"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := renderValues(t, tt.values)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("values don't meet the specifications of the schema"))
			for _, s := range tt.says {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}
}

// TestTemplatesRefuseAFlagAValueSets: extraArgs may not repeat a flag the
// values set, where pflag would take the last and the Service, ports or
// probes would no longer match.
func TestTemplatesRefuseAFlagAValueSets(t *testing.T) {
	g := NewWithT(t)
	_, err := renderValues(t, map[string]any{"extraArgs": []any{"--concurrent=8", "--metrics-addr=:9000"}})
	g.Expect(err).To(MatchError(ContainSubstring("extraArgs: --metrics-addr is set by the value metrics: set that instead")))
	_, err = renderValues(t, map[string]any{"extraArgs": []any{"--enable-leader-election"}})
	g.Expect(err).To(MatchError(ContainSubstring("--enable-leader-election is set by the value leaderElection.enabled")))
	_, err = renderValues(t, map[string]any{"extraArgs": []any{"--watch-label-selector=sharding.fluxcd.io/key=shard1"}})
	g.Expect(err).To(MatchError(ContainSubstring("--watch-label-selector is set by the value watchLabelSelector or shards")))
}
