package lab

import (
	"fmt"
	"path/filepath"
)

// Control-plane daemon names.
const (
	daemonEtcd      = "etcd"
	daemonAPIServer = "kube-apiserver"
	daemonKCM       = "kube-controller-manager"
	daemonScheduler = "kube-scheduler"
)

func (c Config) serviceCIDRs() string {
	return ServiceCIDRv4.String() + "," + ServiceCIDRv6.String()
}

func (c Config) clusterCIDRs() string {
	return PodCIDRv4.String() + "," + PodCIDRv6.String()
}

// controlPlaneDaemons returns etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, in start order. All run in the control-plane namespace; etcd and the
// components' own ports listen on its loopback, so two labs never clash.
func (c Config) controlPlaneDaemons() []daemon {
	ns := c.Namespace(ControlPlane.Name)
	pki := c.pkiDir()
	p := func(f string) string { return filepath.Join(pki, f) }
	bin := func(b string) string { return filepath.Join(c.KubeBin, b) }
	etcdDir := filepath.Join(c.Dir, "etcd")
	return []daemon{
		{Name: daemonEtcd, Netns: ns, Args: []string{"etcd", "--name", "lab", "--data-dir", etcdDir,
			"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", "lab=http://127.0.0.1:2380", "--log-level", "warn"}},
		{Name: daemonAPIServer, Netns: ns, Args: []string{bin("kube-apiserver"),
			"--etcd-servers=http://127.0.0.1:2379",
			"--bind-address=::", fmt.Sprintf("--secure-port=%d", c.APIPort()),
			"--advertise-address=" + ControlPlane.IPv4.String(),
			"--cert-dir=" + filepath.Join(c.Dir, "apiserver"),
			"--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
			"--client-ca-file=" + p("ca.crt"),
			"--kubelet-client-certificate=" + p("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + p("apiserver-kubelet-client.key"),
			"--kubelet-preferred-address-types=InternalIP", // node names do not resolve
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + p("sa.pub"), "--service-account-signing-key-file=" + p("sa.key"),
			"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--service-cluster-ip-range=" + c.serviceCIDRs(),
			"--profiling=false", "--v=1"}},
		{Name: daemonKCM, Netns: ns, Args: []string{bin("kube-controller-manager"),
			"--kubeconfig=" + p("kube-controller-manager.kubeconfig"),
			"--authentication-kubeconfig=" + p("kube-controller-manager.kubeconfig"),
			"--authorization-kubeconfig=" + p("kube-controller-manager.kubeconfig"),
			"--bind-address=127.0.0.1", "--secure-port=10257", "--leader-elect=false",
			"--service-account-private-key-file=" + p("sa.key"), "--root-ca-file=" + p("ca.crt"),
			"--cluster-signing-cert-file=" + p("ca.crt"), "--cluster-signing-key-file=" + p("ca.key"),
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range=" + c.serviceCIDRs(),
			"--cluster-cidr=" + c.clusterCIDRs(), "--allocate-node-cidrs=false",
			"--profiling=false", "--v=1"}},
		{Name: daemonScheduler, Netns: ns, Args: []string{bin("kube-scheduler"),
			"--kubeconfig=" + p("kube-scheduler.kubeconfig"),
			"--authentication-kubeconfig=" + p("kube-scheduler.kubeconfig"),
			"--authorization-kubeconfig=" + p("kube-scheduler.kubeconfig"),
			"--bind-address=127.0.0.1", "--secure-port=10259", "--leader-elect=false",
			"--profiling=false", "--v=1"}},
	}
}
