// Package adminauth decides who may read a process's admin port (metrics, debug endpoints):
// callers on loopback (except on the host network), and callers whose bearer token the API
// server authenticates (TokenReview) and authorises for the request's non-resource URL
// (SubjectAccessReview). The kubelet's probe paths stay open.
//
// Why loopback is trusted in a Pod's own network namespace (the controller, the proxies): the
// kubectl plugin reaches them through the API server's pods/portforward, which the API server
// authorises for the user and which the container runtime completes by dialling localhost
// inside the pod's network namespace. The API server's pods/proxy cannot carry the user's
// identity: it authenticates the user and strips the Authorization header before it proxies
// (k8s.io/apiserver pkg/endpoints/filters/authentication.go), and its own connection to the
// pod carries none. The address checked is the connection's, never a header.
//
// Why loopback is not trusted on the host network (Options.HostNetwork, the speaker): there the
// pod's loopback is the node's, so any process on the node and any host-network pod would be
// served. The speaker's port asks every caller, the kubectl plugin included, for a token.
package adminauth
