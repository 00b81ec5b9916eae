// Package v1alpha1 holds the metalgate.io/v1alpha1 API: the custom resources that configure
// address pools, how their addresses are announced (layer 2 or BGP), and the claims that make
// the API server the lock on every assigned address.
//
// +kubebuilder:object:generate=true
// +groupName=metalgate.io
package v1alpha1
