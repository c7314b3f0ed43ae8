package kubeversion_test

import (
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"

	"github.com/embedops/embedops/internal/kubeversion"
	"github.com/embedops/embedops/test/harness"
)

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		gitVersion string
		compared   bool
		below      bool
	}{
		{gitVersion: "v1.34.0", compared: true},
		{gitVersion: "v1.34.4", compared: true},
		{gitVersion: "v1.34.0-gke.100", compared: true},
		{gitVersion: "v1.34.0-rc.1", compared: true},
		{gitVersion: "v1.34.4-eks-a737599", compared: true},
		{gitVersion: "v1.35.1+k3s1", compared: true},
		{gitVersion: "v1.37.2", compared: true},
		{gitVersion: "v2.0.0", compared: true},
		{gitVersion: "v1.33.13", compared: true, below: true},
		{gitVersion: "v1.31.0-gke.100", compared: true, below: true},
		{gitVersion: "v1.30.4-eks-a737599", compared: true, below: true},
		{gitVersion: "v1.29.9+k3s1", compared: true, below: true},
		{gitVersion: "v1.9.11", compared: true, below: true},
		{gitVersion: "v0.0.0-master+$Format:%H$"},
		{gitVersion: ""},
		{gitVersion: "unknown"},
	} {
		t.Run(tc.gitVersion, func(t *testing.T) {
			compared, err := kubeversion.Compare(tc.gitVersion)
			if compared != tc.compared {
				t.Errorf("compared = %t, want %t", compared, tc.compared)
			}
			if !tc.below {
				if err != nil {
					t.Fatalf("Compare: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Compare passed a version older than the floor")
			}
			for _, want := range []string{tc.gitVersion, "older than " + kubeversion.Floor, "upgrade the cluster to " + kubeversion.Floor} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestCheckOnEnvtest reads the version of the envtest API server: the
// floor's under make test-floor, which must pass and be the floor itself
// (test/tools/kube-floor follows Floor), else bin/kube-apiserver, whose
// unstamped build is not compared.
func TestCheckOnEnvtest(t *testing.T) {
	env, err := harness.StartEnv(harness.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	client, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	server, err := kubeversion.Check(client)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	t.Logf("the API server reports %s (compared with the floor %s: %t)", server.GitVersion, kubeversion.Floor, server.Compared)
	if os.Getenv(harness.KubeAPIServerEnv) == "" {
		return
	}
	if !server.Compared {
		t.Fatalf("the floor's API server reports %q, which Check did not compare: build it with make tools", server.GitVersion)
	}
	found := version.MustParseGeneric(server.GitVersion)
	if got := version.MajorMinor(found.Major(), found.Minor()); !got.EqualTo(version.MustParseMajorMinor(kubeversion.Floor)) {
		t.Errorf("the floor's API server is %s, Floor is %s: test/tools/kube-floor and Floor disagree", got, kubeversion.Floor)
	}
}
