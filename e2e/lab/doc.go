// Package lab builds, inspects and tears down metalgate's hermetic test lab, and gives
// end-to-end tests handles on it: a real Kubernetes cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, and three nodes each running containerd, kubelet and
// kube-proxy in its own network namespace), a client namespace and an FRR router, all on one
// layer-2 segment inside namespaces the lab creates. Nothing is reachable from outside the
// machine and the root namespace forwards nothing.
//
// One source of truth: the names, addresses and ports that `make lab-up` uses are the ones the
// tests read (Config, Topology), so a test never hard-codes 198.51.100.11.
//
// The layout (see e2e/README.md for the picture):
//
//	root netns ── <prefix>api (2001:db8:ffff:<base>::1/64) ──┐  kubectl, go test
//	<prefix>cp      etcd, kube-apiserver, kcm, scheduler      ├─ 198.51.100.2   api0: ::2
//	<prefix>n1..n3  containerd, kubelet, kube-proxy, pods     ├─ 198.51.100.11..13
//	<prefix>router  FRR zebra, bgpd, bfdd (AS 64500)          ├─ 198.51.100.1
//	<prefix>client  curl, arping, ndisc6, tcpdump             ├─ 198.51.100.100
//	<prefix>net     bridge br0 joining all of them ───────────┘
//
// Tests open a running lab with Open; the lab binary (e2e/cmd/lab) calls Up, Down, Status and
// Load.
package lab
