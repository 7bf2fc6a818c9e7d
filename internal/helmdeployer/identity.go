package helmdeployer

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The identity a bundle deploys as. A bundle with a serviceAccount (its own, or fleet-default when
// that exists in the agent's namespace) is restricted to what that ServiceAccount may do, in
// every step the agent takes for it downstream, not only in Helm's: reading helm.valuesFrom,
// creating and labelling the release namespace, copying downstreamResources, uninstalling and
// deleting the namespace. The agent's own identity is cluster-admin; acting as it in any of
// those steps would let a restricted bundle read another namespace's Secrets, switch a
// namespace's Pod Security to privileged, or overwrite Secrets it may not write.

// impersonating is the Config of the agent acting as serviceAccount of its namespace (the agent
// itself for "").
func (d *Deployer) impersonating(serviceAccount string) *rest.Config {
	cfg := rest.CopyConfig(d.cfg)
	if serviceAccount != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + d.agentNamespace + ":" + serviceAccount}
	}
	return cfg
}

// clientAs is a clientset acting as serviceAccount (the agent's own for "").
func (d *Deployer) clientAs(serviceAccount string) (kubernetes.Interface, error) {
	if serviceAccount == "" {
		return d.kube, nil
	}
	if c, ok := d.clients.Load(serviceAccount); ok {
		return c.(kubernetes.Interface), nil
	}
	c, err := kubernetes.NewForConfig(d.impersonating(serviceAccount))
	if err != nil {
		return nil, err
	}
	d.clients.Store(serviceAccount, c)
	return c, nil
}

// bundleClient is the clientset a bundle naming serviceAccount acts as (see serviceAccount).
func (d *Deployer) bundleClient(ctx context.Context, serviceAccount string) (kubernetes.Interface, string, error) {
	sa, err := d.serviceAccount(ctx, serviceAccount)
	if err != nil {
		return nil, "", err
	}
	c, err := d.clientAs(sa)
	return c, sa, err
}

// BundleClient is the clientset the agent acts as, downstream, for a bundle naming
// serviceAccount (see bundleClient): a rollout gate's Job is made with it, so a bundle's gates
// may do no more than its deployment.
func (d *Deployer) BundleClient(ctx context.Context, serviceAccount string) (kubernetes.Interface, error) {
	c, _, err := d.bundleClient(ctx, serviceAccount)
	return c, err
}
