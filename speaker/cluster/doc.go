// Package kube feeds a speaker.Speaker from the API server: it watches the objects
// speaker/config.Build needs, rebuilds the World on every change and records Events on Services
// when this node takes an address over. It only reads, except for Events.
package kube
