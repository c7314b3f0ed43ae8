package harness

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clients are what a started cluster gives its tests: a controller-runtime
// client and a clientset on one config, with the harness's scheme.
type clients struct {
	scheme    *runtime.Scheme
	client    client.Client
	clientset kubernetes.Interface
}

// newClients builds the clients of config.
func newClients(config *rest.Config) (clients, error) {
	scheme, err := NewScheme()
	if err != nil {
		return clients{}, err
	}
	c, err := client.New(config, client.Options{Scheme: scheme})
	if err != nil {
		return clients{}, fmt.Errorf("creating a client: %w", err)
	}
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		return clients{}, fmt.Errorf("creating a clientset: %w", err)
	}
	return clients{scheme: scheme, client: c, clientset: clientset}, nil
}
