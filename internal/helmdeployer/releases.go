package helmdeployer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Releases returns the releases this agent made, as its ledger records them, in every
// namespace; with a bundleID, only that BundleDeployment's. A Secret that merely looks like one
// of its releases is none of them.
func (d *Deployer) Releases(ctx context.Context, bundleID string) ([]*Release, error) {
	entries, err := d.ledgerEntries(ctx, bundleID)
	if err != nil {
		return nil, err
	}
	out := make([]*Release, 0, len(entries))
	for _, e := range entries {
		out = append(out, &Release{Name: e.Name, Namespace: e.Namespace, Version: e.Version, BundleID: e.BundleID,
			DeleteNamespace: e.DeleteNamespace && e.CreatedNamespace})
	}
	return out, nil
}

// Expected is a release a BundleDeployment of this cluster deploys.
type Expected struct {
	Namespace, Name, BundleID string
	DeleteNamespace           bool
	// ServiceAccount is the one the BundleDeployment names (the release is uninstalled as it).
	ServiceAccount string
}

// adoptedMarker is the ConfigMap, in the agent's namespace, that says the agent has adopted the
// releases made before its ledger: adoption is a migration, done once.
const adoptedMarker = "fleet-release-ledger-adopted"

// AdoptReleases enters into the ledger the releases of the BundleDeployments of this cluster
// that exist without an entry: made by a Fleet agent before the move, or by this agent before it
// kept a ledger. A release is adopted only when it is where a BundleDeployment of this cluster
// puts its release and says it belongs to that BundleDeployment (and to no other agent
// namespace); it is labelled as this agent labels its own. The namespace of an adopted release is
// never deleted with it: nothing says the agent created it. It returns how many it adopted.
//
// It runs once: the first start that adopts without an error leaves adoptedMarker, and later
// starts adopt nothing. A release's labels are anyone's to write who may write Secrets in its
// namespace; trusting them at every start would let a downstream user hand the agent a release
// of their making after the move (one needing adoption since then takes helm.takeOwnership).
func (d *Deployer) AdoptReleases(ctx context.Context, expected []Expected) (int, error) {
	cms := d.kube.CoreV1().ConfigMaps(d.agentNamespace)
	if _, err := cms.Get(ctx, adoptedMarker, metav1.GetOptions{}); err == nil {
		return 0, nil
	} else if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("reading %s/%s: %w", d.agentNamespace, adoptedMarker, err)
	}
	adopted, err := d.adopt(ctx, expected)
	if err != nil {
		return adopted, err
	}
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: adoptedMarker, Namespace: d.agentNamespace},
		Data: map[string]string{"adopted": strconv.Itoa(adopted)}}
	if _, err := cms.Create(ctx, marker, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return adopted, fmt.Errorf("recording that the releases before the ledger are adopted: %w", err)
	}
	return adopted, nil
}

// adopt is AdoptReleases' one pass.
func (d *Deployer) adopt(ctx context.Context, expected []Expected) (int, error) {
	adopted := 0
	var errs []error
	for _, x := range expected {
		if e, err := d.ledgerEntry(ctx, x.Namespace, x.Name); err != nil || e != nil {
			errs = append(errs, err)
			continue
		}
		ac, err := d.actionConfig(x.Namespace, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sa, err := d.serviceAccount(ctx, x.ServiceAccount); err == nil {
			x.ServiceAccount = sa
		}
		rel, err := ac.Releases.Last(x.Name)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading release %s/%s: %w", x.Namespace, x.Name, err))
			continue
		}
		agentNS := rel.Labels[AgentNamespaceLabel]
		if agentNS == "" && rel.Chart != nil && rel.Chart.Metadata != nil {
			agentNS = rel.Chart.Metadata.Annotations[fleet.AgentNamespaceAnnotation]
		}
		if owner(rel) != x.BundleID || (agentNS != "" && agentNS != d.agentNamespace) {
			continue
		}
		if rel.Labels[BundleIDLabel] != x.BundleID || rel.Labels[AgentNamespaceLabel] != d.agentNamespace {
			if rel.Labels == nil {
				rel.Labels = map[string]string{}
			}
			rel.Labels[BundleIDLabel], rel.Labels[AgentNamespaceLabel] = x.BundleID, d.agentNamespace
			if err := ac.Releases.Update(rel); err != nil {
				errs = append(errs, fmt.Errorf("labelling release %s/%s: %w", x.Namespace, x.Name, err))
				continue
			}
		}
		if err := d.writeLedger(ctx, ac, entry{Namespace: x.Namespace, Name: x.Name, BundleID: x.BundleID, DeleteNamespace: x.DeleteNamespace,
			ServiceAccount: x.ServiceAccount}); err != nil {
			errs = append(errs, err)
			continue
		}
		adopted++
	}
	return adopted, errors.Join(errs...)
}

func revision(s *corev1.Secret) int {
	v, _ := strconv.Atoi(s.Labels["version"])
	return v
}

// Uninstall removes a release. Resources annotated with helm.sh/resource-policy=keep
// (keepResources) stay. With deleteNamespace the release namespace goes too.
func (d *Deployer) Uninstall(ctx context.Context, r *Release) error {
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	defer d.memo.forget(r.Namespace + "/" + r.Name)
	// As the ServiceAccount the release was deployed as, and only a release of the ledger, from
	// the revision the agent wrote: no hook or deletion of a revision someone else wrote runs with
	// the agent's identity.
	recorded, err := d.ledgerEntry(ctx, r.Namespace, r.Name)
	if err != nil {
		return err
	}
	if recorded == nil {
		return fmt.Errorf("uninstalling release %s/%s: %w", r.Namespace, r.Name, errNotRecorded)
	}
	ac, err := d.actionConfig(r.Namespace, recorded.ServiceAccount)
	if err != nil {
		return err
	}
	// Helm then reads the history verified here: the hooks it runs are the recorded revision's.
	e, _, err := d.verified(ctx, ac, r.Namespace, r.Name)
	if err != nil {
		return fmt.Errorf("uninstalling: %w", err)
	}
	as, err := d.clientAs(e.ServiceAccount)
	if err != nil {
		return err
	}
	un := action.NewUninstall(ac)
	un.IgnoreNotFound = true
	if _, err := un.Run(r.Name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("uninstalling release %s/%s: %w", r.Namespace, r.Name, err)
	}
	if err := deleteDownstream(ctx, as, r.Namespace, e.BundleID); err != nil {
		return err
	}
	// The namespace goes only when the bundle asked for it and the agent created it.
	if e.DeleteNamespace && e.CreatedNamespace && r.Namespace != "default" && !strings.HasPrefix(r.Namespace, "kube-") &&
		r.Namespace != d.agentNamespace {
		err := as.CoreV1().Namespaces().Delete(ctx, r.Namespace, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s of release %s: %w", r.Namespace, r.Name, err)
		}
	}
	return d.forgetLedger(ctx, r.Namespace, r.Name)
}
