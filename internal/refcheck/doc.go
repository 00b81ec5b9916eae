// Package refcheck decides whether the references of metalgate's configuration objects
// resolve: the pools, peers and community names an advertisement uses, the BFDProfile a
// BGPPeer names, the names a Community defines, and the label selectors of each. It is pure:
// the caller lists the namespace's objects (Snapshot) and gets Problems back, each naming
// the field, a reason (v1alpha1.Reason*) and a message.
//
// Two callers share it so they cannot disagree: the controller's references reconciler, which
// writes the Valid condition (Condition), and kubectl metalgate check, which prints the same
// problems as findings.
//
//   - refcheck.go: Snapshot, Problem, the check of each kind, Condition.
//   - selects.go: SelectsPool, whether an advertisement's pool names and selectors pick a pool.
package refcheck
