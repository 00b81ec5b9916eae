package speaker

import "context"

// Sync makes one pass of Run's loop (sync) now, so that the tests of package speaker_test can
// step a Speaker without running Run.
func (s *Speaker) Sync(ctx context.Context) error { return s.sync(ctx) }
