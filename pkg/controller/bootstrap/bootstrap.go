// Package bootstrap creates what a fresh manager needs: the system namespace, fleet-local with
// the Cluster "local" and the ClusterGroup "default", and fleet-default. Existing objects are
// left as they are. (manager)
package bootstrap

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// LocalClusterName is the manager cluster's own Cluster in fleet-local.
const LocalClusterName = "local"

// Run creates the bootstrap objects that do not exist yet.
func Run(ctx context.Context, systemNamespace string, kube kubernetes.Interface, api fleetcontrollers.Interface) error {
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
	_, err = api.Cluster().Create(&fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: LocalClusterName, Namespace: fleet.LocalNamespace, Labels: map[string]string{"name": LocalClusterName}},
		Spec:       fleet.ClusterSpec{KubeConfigSecret: "local-cluster", KubeConfigSecretNamespace: fleet.LocalNamespace},
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bootstrap: cluster %s/%s: %w", fleet.LocalNamespace, LocalClusterName, err)
	}
	return nil
}
