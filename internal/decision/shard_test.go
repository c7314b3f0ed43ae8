package decision

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestShardLabels(t *testing.T) {
	keys := []string{"sharding.fluxcd.io/key", "team"}
	for _, tc := range []struct {
		name   string
		server map[string]string
		want   map[string]string
	}{
		{name: "unsharded", server: map[string]string{"app": "x"}, want: nil},
		{name: "shard key", server: map[string]string{"sharding.fluxcd.io/key": "shard1", "app": "x"},
			want: map[string]string{"sharding.fluxcd.io/key": "shard1"}},
		{name: "every selected key", server: map[string]string{"sharding.fluxcd.io/key": "", "team": "a"},
			want: map[string]string{"sharding.fluxcd.io/key": "", "team": "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(ShardLabels(tc.server, keys)).To(Equal(tc.want))
		})
	}
}

func TestSameShard(t *testing.T) {
	keys := []string{"sharding.fluxcd.io/key"}
	for _, tc := range []struct {
		name            string
		binding, server map[string]string
		want            bool
	}{
		{name: "both unsharded", binding: map[string]string{"a": "1"}, server: nil, want: true},
		{name: "same shard", binding: map[string]string{"sharding.fluxcd.io/key": "s1"},
			server: map[string]string{"sharding.fluxcd.io/key": "s1", "b": "2"}, want: true},
		{name: "other shard", binding: map[string]string{"sharding.fluxcd.io/key": "s1"},
			server: map[string]string{"sharding.fluxcd.io/key": "s2"}, want: false},
		{name: "sharded binding, unsharded server", binding: map[string]string{"sharding.fluxcd.io/key": "s1"}, want: false},
		{name: "empty value is a shard", binding: nil, server: map[string]string{"sharding.fluxcd.io/key": ""}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(SameShard(tc.binding, tc.server, keys)).To(Equal(tc.want))
		})
	}
}
