package claims

import "time"

// SetNow replaces the Store's clock (tests of holds).
func SetNow(s *Store, now func() time.Time) { s.now = now }
