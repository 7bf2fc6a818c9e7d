package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// PodRunner stands in for a kubelet on clusters without one: it runs each Pod of a Job in a
// namespace with the real fleet binary, as the Pod says (command and args, env with Secret
// references, Secrets and ConfigMaps mounted as files, the Pod's ServiceAccount as its
// identity), and writes how its containers ended to the Pod's status, so the Job controller
// completes or fails the Job.
type PodRunner struct {
	Config *rest.Config
	Kube   kubernetes.Interface
	// Binary is the fleet binary every container runs.
	Binary string
	// Log receives each container's command line and output.
	Log  io.Writer
	mu   sync.Mutex
	seen map[string]bool
}

// Run runs the Pods of Jobs in namespace until ctx ends.
func (r *PodRunner) Run(ctx context.Context, namespace string) {
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.mu.Unlock()
	for ctx.Err() == nil {
		pods, err := r.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name"})
		if err == nil {
			for _, p := range pods.Items {
				r.mu.Lock()
				done := r.seen[p.Name]
				r.seen[p.Name] = true
				r.mu.Unlock()
				if !done && p.Status.Phase == corev1.PodPending {
					go func(p *corev1.Pod) {
						if err := r.run(ctx, p); err != nil && r.Log != nil {
							fmt.Fprintf(r.Log, "pod runner: pod %s: %v\n", p.Name, err)
						}
					}(p.DeepCopy())
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func (r *PodRunner) run(ctx context.Context, p *corev1.Pod) error {
	root, err := os.MkdirTemp("", "pod-"+p.Name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	vols := map[string]string{}
	for _, v := range p.Spec.Volumes {
		dir := filepath.Join(root, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		vols[v.Name] = dir
		data := map[string][]byte{}
		switch {
		case v.ConfigMap != nil:
			cm, err := r.Kube.CoreV1().ConfigMaps(p.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
		case v.Secret != nil:
			s, err := r.Kube.CoreV1().Secrets(p.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			data = s.Data
		}
		for k, b := range data {
			if err := os.WriteFile(filepath.Join(dir, k), b, 0o600); err != nil {
				return err
			}
		}
	}
	// The Pod's identity: a token of its ServiceAccount, as the kubelet would give it (the
	// lifetime a projected token volume asks for), to the containers that would have it.
	tokenVolumes, lifetime := map[string]bool{}, (*int64)(nil)
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				tokenVolumes[v.Name], lifetime = true, src.ServiceAccountToken.ExpirationSeconds
			}
		}
	}
	automount := p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken
	hasToken := func(c corev1.Container) bool {
		for _, m := range c.VolumeMounts {
			if tokenVolumes[m.Name] {
				return true
			}
		}
		return automount
	}
	tr, err := r.Kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, p.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: lifetime}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: r.Config.Host, CertificateAuthorityData: r.Config.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	kc.CurrentContext = "c"
	kubeconfig := filepath.Join(root, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return err
	}

	status := p.Status.DeepCopy()
	status.Phase = corev1.PodSucceeded
	runContainer := func(c corev1.Container) (corev1.ContainerStatus, error) {
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				s, err := r.Kube.CoreV1().Secrets(p.Namespace).Get(ctx, e.ValueFrom.SecretKeyRef.Name, metav1.GetOptions{})
				if err != nil {
					return corev1.ContainerStatus{}, err
				}
				env[e.Name] = string(s.Data[e.ValueFrom.SecretKeyRef.Key])
			} else {
				env[e.Name] = e.Value
			}
		}
		mounts := append([]corev1.VolumeMount{}, c.VolumeMounts...)
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].MountPath) > len(mounts[j].MountPath) })
		var args []string
		for _, a := range append(append([]string{}, c.Command[1:]...), c.Args...) {
			a = envRef.ReplaceAllStringFunc(a, func(m string) string { return env[envRef.FindStringSubmatch(m)[1]] })
			for _, m := range mounts {
				if strings.HasPrefix(a, m.MountPath) {
					a = vols[m.Name] + strings.TrimPrefix(a, m.MountPath)
					break
				}
			}
			args = append(args, a)
		}
		cmd := exec.CommandContext(ctx, r.Binary, args...)
		cmd.Env = append(os.Environ(), "HOME="+root)
		if hasToken(c) {
			cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
		} else {
			// No token: not even the test's own kubeconfig.
			cmd.Env = append(cmd.Env, "KUBECONFIG="+filepath.Join(root, "no-kubeconfig"))
		}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		if r.Log != nil {
			fmt.Fprintf(r.Log, "pod %s, container %s: %v\n%s\n", p.Name, c.Name, args, out)
		}
		code, reason := int32(0), "Completed"
		if err != nil {
			code, reason = 1, "Error"
		}
		msg := string(out) // terminationMessagePolicy FallbackToLogsOnError
		if len(msg) > 2048 {
			msg = msg[len(msg)-2048:]
		}
		return corev1.ContainerStatus{Name: c.Name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Message: msg, Reason: reason}}}, nil
	}
	failed := false
	for _, c := range p.Spec.InitContainers {
		s, err := runContainer(c)
		if err != nil {
			return err
		}
		status.InitContainerStatuses = append(status.InitContainerStatuses, s)
		if s.State.Terminated.ExitCode != 0 {
			failed = true
			break
		}
	}
	if !failed {
		for _, c := range p.Spec.Containers {
			s, err := runContainer(c)
			if err != nil {
				return err
			}
			status.ContainerStatuses = append(status.ContainerStatuses, s)
			failed = failed || s.State.Terminated.ExitCode != 0
		}
	}
	if failed {
		status.Phase = corev1.PodFailed
	}
	cur, err := r.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cur.Status = *status
	_, err = r.Kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
