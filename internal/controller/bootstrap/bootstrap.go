// Package bootstrap creates what a fresh manager needs: the system namespace, fleet-local with
// the Cluster "local", its kubeconfig Secret "local-cluster" and the ClusterGroup "default", and
// fleet-default. Existing objects are left as they are. (manager)
package bootstrap

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// LocalClusterName is the manager cluster's own Cluster in fleet-local.
const LocalClusterName = "local"

// LocalKubeconfigSecret holds (key "value") the kubeconfig through which the manager installs
// the agent of its own cluster. It is the manager's own credential, so it lives in the manager's
// system namespace, where no GitRepo, HelmOp or Bundle is (Fleet keeps it in fleet-local, where
// a GitRepo of fleet-local could name it and have it copied to its clusters).
const LocalKubeconfigSecret = "local-cluster"

// LocalAgentNamespace is where the management cluster's own agent runs, apart from the
// manager's system namespace.
const LocalAgentNamespace = "cattle-fleet-local-system"

// Options are the fleet chart's bootstrap values.
type Options struct {
	// LocalAgentDisabled: no Cluster "local" (and so no agent) for the manager's own cluster.
	LocalAgentDisabled bool
	// ClusterLabels are the labels the Cluster "local" is created with (besides name: local).
	ClusterLabels map[string]string
	// AgentNamespace is where the local agent runs (default LocalAgentNamespace).
	AgentNamespace string
}

// Run creates the bootstrap objects that do not exist yet. cfg is the manager's own connection:
// the local Cluster's kubeconfig is made from it.
func Run(ctx context.Context, systemNamespace string, o Options, cfg *rest.Config, kube kubernetes.Interface, api fleetcontrollers.Interface) error {
	for _, ns := range []string{systemNamespace, fleet.LocalNamespace, fleet.DefaultNamespace} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bootstrap: namespace %s: %w", ns, err)
		}
	}
	_, err := api.ClusterGroup().Create(&fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultClusterGroup, Namespace: fleet.LocalNamespace},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}},
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bootstrap: clustergroup %s/%s: %w", fleet.LocalNamespace, fleet.DefaultClusterGroup, err)
	}
	if o.LocalAgentDisabled {
		return nil
	}
	if err := localKubeconfig(ctx, systemNamespace, cfg, kube); err != nil {
		return err
	}
	labels := map[string]string{}
	for k, v := range o.ClusterLabels {
		labels[k] = v
	}
	labels["name"] = LocalClusterName
	agentNS := o.AgentNamespace
	if agentNS == "" {
		agentNS = LocalAgentNamespace
	}
	_, err = api.Cluster().Create(&fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: LocalClusterName, Namespace: fleet.LocalNamespace, Labels: labels},
		Spec: fleet.ClusterSpec{KubeConfigSecret: LocalKubeconfigSecret, KubeConfigSecretNamespace: systemNamespace,
			AgentNamespace: agentNS},
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bootstrap: cluster %s/%s: %w", fleet.LocalNamespace, LocalClusterName, err)
	}
	return moveLocalKubeconfig(ctx, systemNamespace, kube, api)
}

// moveLocalKubeconfig takes the manager's credential out of fleet-local, where earlier builds
// wrote it: the local Cluster is pointed at the system namespace's copy, and the Secret it wrote
// in fleet-local (labelled managed) is deleted. A Secret a user made there is left alone.
func moveLocalKubeconfig(ctx context.Context, systemNamespace string, kube kubernetes.Interface, api fleetcontrollers.Interface) error {
	c, err := api.Cluster().Get(fleet.LocalNamespace, LocalClusterName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("bootstrap: cluster %s/%s: %w", fleet.LocalNamespace, LocalClusterName, err)
	}
	old, err := kube.CoreV1().Secrets(fleet.LocalNamespace).Get(ctx, LocalKubeconfigSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || old.Labels[fleet.ManagedLabel] != "true" {
		return err
	}
	if c.Spec.KubeConfigSecret == LocalKubeconfigSecret && (c.Spec.KubeConfigSecretNamespace == "" || c.Spec.KubeConfigSecretNamespace == fleet.LocalNamespace) {
		c = c.DeepCopy()
		c.Spec.KubeConfigSecretNamespace = systemNamespace
		if _, err := api.Cluster().Update(c); err != nil {
			return fmt.Errorf("bootstrap: pointing cluster %s/%s at %s/%s: %w", c.Namespace, c.Name, systemNamespace, LocalKubeconfigSecret, err)
		}
	}
	err = kube.CoreV1().Secrets(fleet.LocalNamespace).Delete(ctx, LocalKubeconfigSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("bootstrap: deleting %s/%s: %w", fleet.LocalNamespace, LocalKubeconfigSecret, err)
	}
	return nil
}

// localKubeconfig writes the Secret local-cluster from cfg (files read into the kubeconfig; the
// server and its CA also as apiServerURL and apiServerCA). A Secret it wrote before (labelled
// managed) is brought up to date, so a restarted manager hands on its current credential (in a
// pod, a ServiceAccount token that expires); one a user made is left alone.
func localKubeconfig(ctx context.Context, namespace string, cfg *rest.Config, kube kubernetes.Interface) error {
	if cfg == nil {
		return nil
	}
	data, err := kubeconfigData(cfg)
	if err != nil {
		return err
	}
	secrets := kube.CoreV1().Secrets(namespace)
	// The labels name the one Cluster this credential may serve (see clusterimport).
	want := map[string]string{fleet.ManagedLabel: "true", fleet.ClusterLabel: LocalClusterName, fleet.ClusterNamespaceLabel: fleet.LocalNamespace}
	cur, err := secrets.Get(ctx, LocalKubeconfigSecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: LocalKubeconfigSecret, Namespace: namespace, Labels: want},
			Data:       data}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case err == nil && cur.Labels[fleet.ManagedLabel] == "true" && (!reflect.DeepEqual(cur.Data, data) || !labels.SelectorFromSet(want).Matches(labels.Set(cur.Labels))):
		cur = cur.DeepCopy()
		cur.Data = data
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		for k, v := range want {
			cur.Labels[k] = v
		}
		_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("bootstrap: secret %s/%s: %w", namespace, LocalKubeconfigSecret, err)
	}
	return nil
}

// kubeconfigData is the Secret data for the manager's connection cfg.
func kubeconfigData(cfg *rest.Config) (map[string][]byte, error) {
	c := rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(c); err != nil {
		return nil, fmt.Errorf("bootstrap: reading the manager's TLS files: %w", err)
	}
	token := c.BearerToken
	if c.BearerTokenFile != "" {
		b, err := os.ReadFile(c.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: reading the manager's token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData, InsecureSkipTLSVerify: c.Insecure}
	kc.AuthInfos["local"] = &clientcmdapi.AuthInfo{Token: token, ClientCertificateData: c.CertData, ClientKeyData: c.KeyData}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	kc.CurrentContext = "local"
	value, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, err
	}
	// The agent of this cluster reaches the manager the way the manager reaches itself.
	return map[string][]byte{"value": value, registration.KeyAPIServerURL: []byte(c.Host), registration.KeyAPIServerCA: c.CAData}, nil
}
