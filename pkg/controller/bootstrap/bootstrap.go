// Package bootstrap creates what a fresh manager needs: the system namespace, fleet-local with
// the Cluster "local", its kubeconfig Secret "local-cluster" and the ClusterGroup "default", and
// fleet-default. Existing objects are left as they are. (manager)
package bootstrap

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/registration"
)

// LocalClusterName is the manager cluster's own Cluster in fleet-local.
const LocalClusterName = "local"

// LocalKubeconfigSecret holds (key "value") the kubeconfig through which the manager installs
// the agent of its own cluster.
const LocalKubeconfigSecret = "local-cluster"

// LocalAgentNamespace is where the management cluster's own agent runs, apart from the
// manager's system namespace.
const LocalAgentNamespace = "cattle-fleet-local-system"

// Run creates the bootstrap objects that do not exist yet. cfg is the manager's own connection:
// the local Cluster's kubeconfig is made from it.
func Run(ctx context.Context, systemNamespace string, cfg *rest.Config, kube kubernetes.Interface, api fleetcontrollers.Interface) error {
	for _, ns := range []string{systemNamespace, fleet.LocalNamespace, fleet.DefaultNamespace} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bootstrap: namespace %s: %w", ns, err)
		}
	}
	if err := localKubeconfig(ctx, cfg, kube); err != nil {
		return err
	}
	_, err := api.ClusterGroup().Create(&fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultClusterGroup, Namespace: fleet.LocalNamespace},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}},
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bootstrap: clustergroup %s/%s: %w", fleet.LocalNamespace, fleet.DefaultClusterGroup, err)
	}
	_, err = api.Cluster().Create(&fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: LocalClusterName, Namespace: fleet.LocalNamespace, Labels: map[string]string{"name": LocalClusterName}},
		Spec: fleet.ClusterSpec{KubeConfigSecret: LocalKubeconfigSecret, KubeConfigSecretNamespace: fleet.LocalNamespace,
			AgentNamespace: LocalAgentNamespace},
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bootstrap: cluster %s/%s: %w", fleet.LocalNamespace, LocalClusterName, err)
	}
	return nil
}

// localKubeconfig writes the Secret local-cluster from cfg (files read into the kubeconfig; the
// server and its CA also as apiServerURL and apiServerCA), when it does not exist.
func localKubeconfig(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface) error {
	if cfg == nil {
		return nil
	}
	_, err := kube.CoreV1().Secrets(fleet.LocalNamespace).Get(ctx, LocalKubeconfigSecret, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	c := rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(c); err != nil {
		return fmt.Errorf("bootstrap: reading the manager's TLS files: %w", err)
	}
	token := c.BearerToken
	if c.BearerTokenFile != "" {
		b, err := os.ReadFile(c.BearerTokenFile)
		if err != nil {
			return fmt.Errorf("bootstrap: reading the manager's token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData, InsecureSkipTLSVerify: c.Insecure}
	kc.AuthInfos["local"] = &clientcmdapi.AuthInfo{Token: token, ClientCertificateData: c.CertData, ClientKeyData: c.KeyData}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	kc.CurrentContext = "local"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Secrets(fleet.LocalNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: LocalKubeconfigSecret, Namespace: fleet.LocalNamespace},
		// The agent of this cluster reaches the manager the way the manager reaches itself.
		Data: map[string][]byte{"value": data, registration.KeyAPIServerURL: []byte(c.Host), registration.KeyAPIServerCA: c.CAData}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bootstrap: secret %s/%s: %w", fleet.LocalNamespace, LocalKubeconfigSecret, err)
	}
	return nil
}
