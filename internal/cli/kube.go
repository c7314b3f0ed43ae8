package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/internal/controller"
)

// kubeOptions are the kubectl-style flags that pick a cluster and namespace.
type kubeOptions struct {
	kubeconfig    string
	context       string
	namespace     string
	allNamespaces bool
}

// bind adds the flags to cmd.
func (o *kubeOptions) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&o.context, "context", "", "kubeconfig context to use")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace (default: the context's)")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "every namespace")
}

// clientConfig loads the kubeconfig as kubectl does.
func (o *kubeOptions) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// client returns a client for the chosen cluster and the namespace to read:
// "" for all namespaces.
func (o *kubeOptions) client() (client.Client, string, error) {
	config := o.clientConfig()
	restConfig, err := config.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the kubeconfig: %w", err)
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to the cluster: %w", err)
	}
	if o.allNamespaces {
		return c, "", nil
	}
	namespace := o.namespace
	if namespace == "" {
		if namespace, _, err = config.Namespace(); err != nil {
			return nil, "", fmt.Errorf("reading the context's namespace: %w", err)
		}
	}
	return c, namespace, nil
}
