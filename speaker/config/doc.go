// Package config translates the API objects a speaker watches (Services, EndpointSlices, Nodes,
// IPAddressPools, L2Advertisements, speaker Pods) into a speaker.World, without any I/O: one pure
// Build shared by the running speaker and its tests.
package config
