// Package refgrant answers one question for every translator of the proxy: does a Gateway API
// ReferenceGrant let an object of one namespace refer to an object of another? Gateway routes
// (backendRefs), Gateways (certificateRefs) and Ingresses (auth-url to another namespace's
// Service) all ask Allows, so the rule is the same wherever a reference crosses a namespace.
package refgrant
