package gitrepo

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/charts"
	"github.com/fleetgo/fleet/internal/gitsource"
)

// KnownHostsConfigMap is the fleet chart's ConfigMap of SSH host keys (key known_hosts).
const KnownHostsConfigMap = "known-hosts"

// knownHostsTTL bounds how long a read of the ConfigMap stands (a poll of every SSH GitRepo
// needs it).
const knownHostsTTL = 30 * time.Second

// KnownHosts are the SSH host keys git clones trust when a GitRepo's secret holds no
// known_hosts: those of the ConfigMap known-hosts in the system namespace (the providers' keys
// and the chart's additionalKnownHosts), or the keys the chart ships when there is none. With
// Insecure (the chart's insecureSkipHostKeyChecks) a host they do not name is trusted.
type KnownHosts struct {
	Kube      kubernetes.Interface
	Namespace string
	Insecure  bool

	mu   sync.Mutex
	data []byte
	at   time.Time
}

// fill gives SSH credentials without known_hosts the shared ones.
func (k *KnownHosts) fill(ctx context.Context, a *gitsource.Auth) error {
	if k == nil || len(a.SSHPrivateKey) == 0 || len(a.KnownHosts) > 0 {
		return nil
	}
	data, err := k.get(ctx)
	if err != nil {
		return err
	}
	a.KnownHosts, a.InsecureIgnoreHostKey = data, k.Insecure
	return nil
}

func (k *KnownHosts) get(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.data != nil && time.Since(k.at) < knownHostsTTL {
		return k.data, nil
	}
	cm, err := k.Kube.CoreV1().ConfigMaps(k.Namespace).Get(ctx, KnownHostsConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		k.data = charts.KnownHosts()
	case err != nil:
		return nil, err
	default:
		k.data = []byte(cm.Data["known_hosts"])
	}
	k.at = time.Now()
	return k.data, nil
}
