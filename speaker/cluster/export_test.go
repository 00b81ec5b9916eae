package cluster

import "context"

// Sync makes one pass of Start's loop (sync) now, so that the tests of package cluster_test
// can step a BGPStatus without running Start.
func (b *BGPStatus) Sync(ctx context.Context) error { return b.sync(ctx) }

// The cache transforms, for transform_test.go.
var (
	TrimService       = trimService
	TrimEndpointSlice = trimEndpointSlice
	TrimNode          = trimNode
)
