// Package contract holds the names and shapes that metalgate's components agree on across a
// process boundary: the annotation names and label keys they read and write on Kubernetes
// objects, the reasons of the Events they record, and the paths and JSON bodies of the debug
// endpoints that kubectl metalgate reads. The controller, the speaker, the proxy and the
// kubectl plugin all import it, so that no side keeps its own copy of a name and the plugin
// depends on these contracts rather than on the internals of the components it inspects.
//
// It holds constants and plain data types only, and imports nothing from this module.
// CRD types live in api/v1alpha1; what a component does with these names stays in it.
package contract
