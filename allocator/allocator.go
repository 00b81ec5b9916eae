package allocator

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// LabelMatcher reports whether a set of labels matches a selector (the controller converts
// metav1.LabelSelector to this). It is called with the Allocator's lock held and must not
// call the Allocator.
type LabelMatcher func(labels map[string]string) bool

// Pool is an address pool as the allocator sees it.
type Pool struct {
	Name string
	// Addresses: each a CIDR ("100.64.0.0/16", "2001:db8::/64") or a range "start-end"
	// ("192.0.2.10-192.0.2.20", spaces around '-' allowed); see ParseRange. IPv4 and IPv6
	// may be mixed in one pool; overlapping entries are merged.
	Addresses []string
	// AutoAssign false: only Services that request this pool by name, or request one of its
	// addresses, get addresses from it.
	AutoAssign bool
	// AvoidBuggyIPs: the pool does not contain IPv4 addresses whose last octet is 0 or 255.
	AvoidBuggyIPs bool
	// Priority: lower value = preferred; 0 means "no priority" and sorts after every pool
	// with a non-zero priority. Ties are broken by pool name.
	Priority int
	// serviceAllocation: when any of the three lists is set, the pool only serves Services
	// whose namespace is in Namespaces or matches one of NamespaceSelectors (when either is
	// set) and whose labels match one of ServiceSelectors (when set).
	Namespaces         []string
	NamespaceSelectors []LabelMatcher
	ServiceSelectors   []LabelMatcher
	// ShareAcrossNamespaces lets Services of different namespaces share one of the pool's
	// addresses under one sharing key (MetalLB's behaviour). False, the default: a sharing key
	// joins only Services of one namespace, so a tenant cannot attach to another tenant's
	// address by guessing its key (architecture invariant 10).
	ShareAcrossNamespaces bool
}

// Family is an IP address family.
type Family int

// The address families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return "Family(" + strconv.Itoa(int(f)) + ")"
}

// FamilyPolicy is a Service's spec.ipFamilyPolicy.
type FamilyPolicy int

// The family policies.
const (
	SingleStack FamilyPolicy = iota
	PreferDualStack
	RequireDualStack
)

func (p FamilyPolicy) String() string {
	switch p {
	case SingleStack:
		return "SingleStack"
	case PreferDualStack:
		return "PreferDualStack"
	case RequireDualStack:
		return "RequireDualStack"
	}
	return "FamilyPolicy(" + strconv.Itoa(int(p)) + ")"
}

// Port is one Service port. Protocols are compared case-insensitively.
type Port struct {
	Protocol string
	Port     int32
}

// Request describes what a Service wants.
type Request struct {
	Key             string // the Service, "namespace/name"; one key holds at most one address per family
	Namespace       string
	NamespaceLabels map[string]string
	ServiceLabels   map[string]string
	Pool            string       // requested pool name, "" = any eligible pool
	Addresses       []netip.Addr // requested addresses (at most one per family); when set, exactly these or an error
	Policy          FamilyPolicy
	// Families is the Service's spec.ipFamilies order; empty = [IPv4]. SingleStack uses
	// Families[0]; dual-stack policies use both families, Families[0] first.
	Families   []Family
	SharingKey string // "" = never share
	Ports      []Port
	BackendKey string // non-empty when externalTrafficPolicy=Local: Services sharing an address must have equal BackendKey
}

// Assignment is what a key holds: the pool and the addresses, in the request's family order.
type Assignment struct {
	Pool      string
	Addresses []netip.Addr
}

// Allocator assigns addresses from pools to keys. It is safe for concurrent use.
type Allocator struct {
	mu      sync.Mutex
	ps      *poolSet
	keys    map[string]*holding
	holders map[u128][]string              // sorted keys holding each held address (addrKey)
	sharing map[string]map[string]struct{} // sharing key -> keys that hold addresses with it
}

// addrKey is the holders index key of a canonical address: its 16-byte form (IPv4 as
// ::ffff:a.b.c.d, which no IPv6 pool may contain). Pointer-free, unlike netip.Addr.
func addrKey(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func keyAddr(k u128) netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], k.hi)
	binary.BigEndian.PutUint64(b[8:], k.lo)
	return netip.AddrFrom16(b).Unmap()
}

// holding is what one key holds, with the request it was last assigned or restored for.
// It is a single allocation.
type holding struct {
	self [1]string // the key: the holder list of an address only this key holds
	pool string
	n    int
	buf  [2]netip.Addr // held addresses, buf[:n], in the request's family order
	req  request
}

func (h *holding) addrs() []netip.Addr { return h.buf[:h.n] }

func (h *holding) assignment() Assignment {
	return Assignment{Pool: h.pool, Addresses: slices.Clone(h.addrs())}
}

// New returns an Allocator with no pools.
func New() *Allocator {
	ps, _ := buildPools(nil)
	return &Allocator{
		ps:      ps,
		keys:    make(map[string]*holding),
		holders: make(map[u128][]string),
		sharing: make(map[string]map[string]struct{}),
	}
}

// request is a validated Request. Of the embedded Request only the scalar fields and Ports
// (copied) are kept once it is stored; the validated families and addresses are below.
type request struct {
	Request
	fams   [2]Family // Families with the default applied: fams[:nfams]
	nfams  int
	order  [2]Family // primary family, then the other one
	nwant  int       // families to allocate: order[:nwant] (1 for SingleStack)
	raddrs [2]netip.Addr
	nraddr int // canonical requested addresses, raddrs[:nraddr], in family order
}

func (r *request) famList() []Family   { return r.fams[:r.nfams] }
func (r *request) want() []Family      { return r.order[:r.nwant] }
func (r *request) addrs() []netip.Addr { return r.raddrs[:r.nraddr] }

// newRequest validates req into r. With checkAddrs, req.Addresses must suit the family
// policy.
func newRequest(r *request, req Request, checkAddrs bool) error {
	if req.Key == "" {
		return errorf(ErrInvalidRequest, "request has no key")
	}
	*r = request{Request: req}
	r.Ports = slices.Clone(req.Ports)
	r.Addresses = nil
	r.Families = nil
	r.NamespaceLabels = nil
	r.ServiceLabels = nil
	fams := req.Families
	if len(fams) == 0 {
		fams = []Family{IPv4}
	}
	if len(fams) > 2 {
		return errorf(ErrInvalidRequest, "%s: %d IP families given, at most 2 allowed", req.Key, len(fams))
	}
	for _, f := range fams {
		if f != IPv4 && f != IPv6 {
			return errorf(ErrInvalidRequest, "%s: unknown IP family %d", req.Key, int(f))
		}
	}
	if len(fams) == 2 && fams[0] == fams[1] {
		return errorf(ErrInvalidRequest, "%s: IP family %s listed twice", req.Key, fams[0])
	}
	r.nfams = copy(r.fams[:], fams)
	r.order = [2]Family{fams[0], IPv6}
	if fams[0] == IPv6 {
		r.order[1] = IPv4
	}
	switch req.Policy {
	case SingleStack:
		r.nwant = 1
	case PreferDualStack, RequireDualStack:
		r.nwant = 2
	default:
		return errorf(ErrInvalidRequest, "%s: unknown IP family policy %d", req.Key, int(req.Policy))
	}
	if !checkAddrs || len(req.Addresses) == 0 {
		return nil
	}
	var buf [2]netip.Addr
	n, err := r.orderAddrs(&buf, req.Addresses)
	if err != nil {
		return err
	}
	addrs := buf[:n]
	switch {
	case req.Policy == SingleStack && (n != 1 || famIndex(addrs[0]) != r.order[0].index()):
		return errorf(ErrInvalidAddress, "%s: a SingleStack %s Service must request exactly one %s address, got %s",
			req.Key, r.order[0], r.order[0], joinAddrs(addrs))
	case req.Policy == RequireDualStack && n != 2:
		return errorf(ErrInvalidAddress, "%s: a RequireDualStack Service must request one IPv4 and one IPv6 address, got %s",
			req.Key, joinAddrs(addrs))
	}
	r.raddrs, r.nraddr = buf, n
	return nil
}

// orderAddrs canonicalises in into out, rejects two addresses of one family and sorts
// them in the request's family order.
func (r *request) orderAddrs(out *[2]netip.Addr, in []netip.Addr) (int, error) {
	n := 0
	var seen [2]bool
	for _, a := range in {
		c, err := canonical(a)
		if err != nil {
			return 0, err
		}
		fi := famIndex(c)
		if seen[fi] {
			return 0, errorf(ErrInvalidAddress, "%s: more than one %s address given (%s); a Service holds at most one address per family",
				r.Key, familyOfIndex(fi), joinAddrs(in))
		}
		seen[fi] = true
		out[n] = c
		n++
	}
	if n == 2 && famIndex(out[0]) != r.order[0].index() {
		out[0], out[1] = out[1], out[0]
	}
	return n, nil
}

func joinAddrs(addrs []netip.Addr) string {
	if len(addrs) == 0 {
		return "none"
	}
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func joinPoolNames(ps []*poolState) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = quote(p.cfg.Name)
	}
	return strings.Join(s, ", ")
}

func famNames(fams []Family) string {
	if len(fams) == 2 {
		return "both IPv4 and IPv6"
	}
	return fams[0].String()
}

// SetPools replaces the pool set. Invalid pools (bad address syntax, start after end, mixed
// family range, duplicate or empty name, nil selector) make it return an error wrapping
// ErrInvalidPool and leave the previous state untouched. Held addresses stay held when still
// covered by some pool; a key whose recorded pool is gone or no longer covers all its
// addresses moves to the first pool (in preference order) that covers all of them. Keys
// holding any address no longer covered by any pool, or whose addresses are no longer all
// in one common pool, are released entirely and returned, sorted, so the caller can
// re-allocate them; so are the holders of an address shared across namespaces in a pool that
// no longer allows it, except those of the first holder's namespace. Service eligibility is
// not re-checked here; the next Assign does that.
func (a *Allocator) SetPools(pools []Pool) (released []string, err error) {
	ps, err := buildPools(pools)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	moved := make(map[string]string)
	for key, h := range a.keys {
		var p *poolState
		if old := ps.byName[h.pool]; old != nil && old.coversAll(h.addrs()) {
			p = old
		} else {
			for _, cand := range ps.order {
				if cand.coversAll(h.addrs()) {
					p = cand
					break
				}
			}
		}
		if p == nil {
			released = append(released, key)
		} else if p.cfg.Name != h.pool {
			moved[key] = p.cfg.Name
		}
	}
	sort.Strings(released)
	for _, key := range released {
		a.forget(key)
	}
	for key, name := range moved {
		a.keys[key].pool = name
	}
	a.ps = ps
	// A pool that no longer lets namespaces share an address: the holders in the namespace of
	// the first holder by key keep it (the order in which a restarting controller restores
	// them), the others are released and allocated anew.
	split := map[string]bool{}
	for _, hs := range a.holders {
		if len(hs) < 2 {
			continue
		}
		first := a.keys[hs[0]]
		for _, key := range hs[1:] {
			h := a.keys[key]
			if h.req.Namespace != first.req.Namespace && !scopeOf(ps.byName[h.pool], ps.byName[first.pool]).across {
				split[key] = true
			}
		}
	}
	for key := range split {
		a.forget(key)
		released = append(released, key)
	}
	sort.Strings(released)
	for k := range a.holders {
		ps.setUsed(keyAddr(k), true)
	}
	return released, nil
}

// Assign returns addresses for req.Key. It is idempotent: when the key already holds
// addresses that satisfy req (same Policy and Families, the requested addresses if any, the
// requested pool if any, sharing still compatible with the other holders, and the pool's
// serviceAllocation still admitting the Service), it returns them unchanged and records req
// as the key's current request (ports, sharing and backend keys). AutoAssign is not
// re-checked for addresses already held. Otherwise it releases what the key held and
// allocates anew; on error the key holds nothing (except for errors wrapping
// ErrInvalidRequest or ErrInvalidAddress, which reject req before anything changes).
//
// Allocation is deterministic: pools are tried in Priority-then-name order and each gives
// its lowest free address. Dual-stack addresses always come from one pool; PreferDualStack
// falls back to the primary family alone, then to the secondary family alone, when no
// candidate pool can supply both; RequireDualStack fails instead. With a SharingKey, an
// address already held by Services with the same sharing key, no common protocol/port and
// the same BackendKey is preferred to a free one: the candidate pools are first searched, in
// order, for shareable addresses (lowest first) before any free address is taken.
//
// Requested addresses (req.Addresses) may come from a pool with AutoAssign false, but must
// be usable addresses of one pool eligible for the Service (the requested pool, if set).
func (a *Allocator) Assign(req Request) (Assignment, error) {
	var r request
	if err := newRequest(&r, req, true); err != nil {
		return Assignment{}, err
	}
	// Eligibility is evaluated on the labels of this call; they are not stored.
	r.NamespaceLabels, r.ServiceLabels = req.NamespaceLabels, req.ServiceLabels
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.keys[r.Key]; h != nil {
		if a.satisfies(h, &r) {
			a.setRequest(h, &r)
			return h.assignment(), nil
		}
		a.forget(r.Key)
	}
	var (
		p     *poolState
		pair  [2]netip.Addr
		n     int
		err   error
		cbuf  [16]*poolState
		cands []*poolState
	)
	if r.nraddr > 0 {
		cands, err = a.candidates(&r, true, cbuf[:0])
		if err == nil {
			p, err = a.pickRequested(&r, cands)
			pair, n = r.raddrs, r.nraddr
		}
	} else {
		cands, err = a.candidates(&r, false, cbuf[:0])
		if err == nil {
			p, pair, n, err = a.pickAuto(&r, cands)
		}
	}
	if err != nil {
		return Assignment{}, err
	}
	return a.hold(&r, p, pair[:n]).assignment(), nil
}

// Restore records that req.Key holds addrs (learned from the API server) without choosing
// anything. The addresses must be usable addresses of one pool (req.Pool when it covers
// them, else the first in preference order; serviceAllocation and AutoAssign are not
// checked) and must not be held incompatibly by another key. Whatever the key held before
// is replaced; on error nothing changes. req.Addresses is ignored.
func (a *Allocator) Restore(req Request, addrs []netip.Addr) (Assignment, error) {
	var r request
	if err := newRequest(&r, req, false); err != nil {
		return Assignment{}, err
	}
	var buf [2]netip.Addr
	n, err := r.orderAddrs(&buf, addrs)
	if err != nil {
		return Assignment{}, err
	}
	if n == 0 {
		return Assignment{}, errorf(ErrInvalidAddress, "%s: no address to restore", r.Key)
	}
	ordered := buf[:n]
	a.mu.Lock()
	defer a.mu.Unlock()
	var p *poolState
	if want := a.ps.byName[r.Pool]; want != nil && want.coversAll(ordered) {
		p = want
	} else {
		for _, cand := range a.ps.order {
			if cand.coversAll(ordered) {
				p = cand
				break
			}
		}
	}
	if p == nil {
		return Assignment{}, a.notInPoolError(&r, ordered, nil, false)
	}
	if err := a.checkHolders(&r, p, ordered); err != nil {
		return Assignment{}, err
	}
	a.forget(r.Key)
	return a.hold(&r, p, ordered).assignment(), nil
}

// Release drops whatever key holds; it is a no-op if the key holds nothing.
func (a *Allocator) Release(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.forget(key)
}

// satisfies reports whether the holding h can serve r unchanged.
func (a *Allocator) satisfies(h *holding, r *request) bool {
	if h.req.Policy != r.Policy || !slices.Equal(h.req.famList(), r.famList()) {
		return false
	}
	switch r.Policy {
	case SingleStack:
		if h.n != 1 || famIndex(h.buf[0]) != r.order[0].index() {
			return false
		}
	case RequireDualStack:
		if h.n != 2 {
			return false
		}
	}
	if r.nraddr > 0 && !slices.Equal(h.addrs(), r.addrs()) {
		return false
	}
	if r.Pool != "" && h.pool != r.Pool {
		return false
	}
	if p := a.ps.byName[h.pool]; p == nil || !p.eligible(&r.Request) {
		return false
	}
	return a.checkHolders(r, a.ps.byName[h.pool], h.addrs()) == nil
}

// checkHolders returns why r, taking addrs from pool rp, cannot hold them next to their other
// holders, or nil.
func (a *Allocator) checkHolders(r *request, rp *poolState, addrs []netip.Addr) error {
	for _, x := range addrs {
		for _, k := range a.holders[addrKey(x)] {
			if k == r.Key {
				continue
			}
			h := a.keys[k]
			if err := conflict(r, x, k, &h.req, scopeOf(rp, a.ps.byName[h.pool])); err != nil {
				return err
			}
		}
	}
	return nil
}

// sharingScope is what the pools involved allow: Services of different namespaces may share
// an address only when every pool involved says so.
type sharingScope struct {
	pool   string // named in errors
	across bool
}

// scopeOf is the scope of an address that a request takes from pool rp and a holder holds
// from pool hp (nil: a pool that no longer exists, which allows nothing across namespaces).
func scopeOf(rp, hp *poolState) sharingScope {
	s := sharingScope{across: rp != nil && hp != nil && rp.cfg.ShareAcrossNamespaces && hp.cfg.ShareAcrossNamespaces}
	switch {
	case hp != nil:
		s.pool = hp.cfg.Name
	case rp != nil:
		s.pool = rp.cfg.Name
	}
	return s
}

// SharingConflict returns why Services x and y cannot hold addr of pool together (an error
// wrapping ErrInUse or ErrSharingRefused), or nil when they may share it. Only the sharing
// fields of the requests matter: Key, Namespace, SharingKey, BackendKey and Ports; and the
// pool's ShareAcrossNamespaces, as currently configured (a pool it does not know shares
// within one namespace only).
func (a *Allocator) SharingConflict(addr netip.Addr, pool string, x, y Request) error {
	a.mu.Lock()
	p := a.ps.byName[pool]
	a.mu.Unlock()
	return conflict(&request{Request: x}, addr, y.Key, &request{Request: y}, scopeOf(p, p))
}

// conflict returns why r cannot share address x with holder key hk (whose request is h) in
// scope, or nil if it can.
func conflict(r *request, x netip.Addr, hk string, h *request, scope sharingScope) error {
	switch {
	case r.SharingKey == "" && h.SharingKey == "":
		return errorf(ErrInUse, "address %s is already used by Service %s", x, hk)
	case r.SharingKey == "":
		return errorf(ErrInUse, "address %s is already used by Service %s (which shares it under sharing key %q; set the same key on %s to share it)",
			x, hk, h.SharingKey, r.Key)
	case h.SharingKey == "":
		return errorf(ErrInUse, "address %s is already used by Service %s, which does not allow sharing", x, hk)
	case r.SharingKey != h.SharingKey:
		return errorf(ErrSharingRefused, "address %s is used by Service %s with sharing key %q, but %s has sharing key %q",
			x, hk, h.SharingKey, r.Key, r.SharingKey)
	case r.Namespace != h.Namespace && !scope.across:
		return errorf(ErrSharingRefused, "address %s is shared under key %q by Service %s of another namespace; pool %q shares an address only among Services of one namespace (its spec.addressSharing AcrossNamespaces would allow %s)",
			x, h.SharingKey, hk, scope.pool, r.Key)
	case r.BackendKey != h.BackendKey:
		return errorf(ErrSharingRefused, "address %s is used by Service %s with backend key %q, but %s has %q: Services sharing an address with externalTrafficPolicy Local must select the same endpoints",
			x, hk, h.BackendKey, r.Key, r.BackendKey)
	}
	for _, p := range r.Ports {
		for _, q := range h.Ports {
			if p.Port == q.Port && strings.EqualFold(p.Protocol, q.Protocol) {
				return errorf(ErrSharingRefused, "address %s: port %s/%d of %s is already used by Service %s",
					x, strings.ToUpper(p.Protocol), p.Port, r.Key, hk)
			}
		}
	}
	return nil
}

// candidates appends to buf the pools r may use, in preference order: the requested pool,
// or every eligible pool (only AutoAssign ones unless the addresses are requested).
func (a *Allocator) candidates(r *request, requested bool, buf []*poolState) ([]*poolState, error) {
	if r.Pool != "" {
		p := a.ps.byName[r.Pool]
		if p == nil {
			return nil, errorf(ErrNoSuchPool, "%s requests pool %q, which does not exist", r.Key, r.Pool)
		}
		if !p.eligible(&r.Request) {
			return nil, errorf(ErrPoolNotEligible, "%s requests pool %q, whose serviceAllocation (namespaces, namespace or service selectors) does not admit it",
				r.Key, r.Pool)
		}
		return append(buf, p), nil
	}
	for _, p := range a.ps.order {
		if (requested || p.cfg.AutoAssign) && p.eligible(&r.Request) {
			buf = append(buf, p)
		}
	}
	return buf, nil
}

// pickRequested finds the pool among cands for r's requested addresses and checks they are
// free or shareable.
func (a *Allocator) pickRequested(r *request, cands []*poolState) (*poolState, error) {
	var p *poolState
	for _, c := range cands {
		if c.coversAll(r.addrs()) {
			p = c
			break
		}
	}
	if p == nil {
		return nil, a.notInPoolError(r, r.addrs(), cands, true)
	}
	if err := a.checkHolders(r, p, r.addrs()); err != nil {
		return nil, err
	}
	return p, nil
}

// notInPoolError explains why no pool (among cands when eligibility matters) covers addrs.
func (a *Allocator) notInPoolError(r *request, addrs []netip.Addr, cands []*poolState, eligibility bool) error {
	for _, x := range addrs {
		raw := a.ps.poolsAt(x)
		var usable []*poolState
		for _, p := range raw {
			if p.covers(x) {
				usable = append(usable, p)
			}
		}
		if len(usable) == 0 {
			if len(raw) > 0 {
				return errorf(ErrNotInPool, "address %s requested by %s is excluded by avoidBuggyIPs (addresses ending in .0 or .255) in pool %s",
					x, r.Key, joinPoolNames(raw))
			}
			return errorf(ErrNotInPool, "address %s of %s is not in any address pool", x, r.Key)
		}
		if !eligibility {
			continue
		}
		if r.Pool != "" {
			if !slices.Contains(usable, cands[0]) {
				return errorf(ErrNotInPool, "address %s requested by %s is not in the requested pool %q (it is in %s)",
					x, r.Key, r.Pool, joinPoolNames(usable))
			}
			continue
		}
		var ok bool
		for _, p := range usable {
			ok = ok || slices.Contains(cands, p)
		}
		if !ok {
			return errorf(ErrNotInPool, "address %s requested by %s is only in pool %s, whose serviceAllocation does not admit the Service",
				x, r.Key, joinPoolNames(usable))
		}
	}
	return errorf(ErrNotInPool, "addresses %s of %s are not all in one eligible pool; dual-stack addresses must come from one pool",
		joinAddrs(addrs), r.Key)
}

// pickAuto chooses a pool among cands and addresses for r, which requests no address.
func (a *Allocator) pickAuto(r *request, cands []*poolState) (*poolState, [2]netip.Addr, int, error) {
	if r.Policy != PreferDualStack {
		return a.pickFamilies(r, cands, r.want())
	}
	p, addrs, n, errDual := a.pickFamilies(r, cands, r.order[:])
	if errDual == nil {
		return p, addrs, n, nil
	}
	p, addrs, n, err1 := a.pickFamilies(r, cands, r.order[:1])
	if err1 == nil {
		return p, addrs, n, nil
	}
	p, addrs, n, err2 := a.pickFamilies(r, cands, r.order[1:])
	if err2 == nil {
		return p, addrs, n, nil
	}
	if errors.Is(err1, ErrFamilyUnavailable) && !errors.Is(err2, ErrFamilyUnavailable) {
		return nil, addrs, 0, err2
	}
	return nil, addrs, 0, err1
}

// pickFamilies chooses one pool among cands and one address of each family in fams from it.
func (a *Allocator) pickFamilies(r *request, cands []*poolState, fams []Family) (*poolState, [2]netip.Addr, int, error) {
	var addrs [2]netip.Addr
	var pbuf [16]*poolState
	pools := pbuf[:0]
	for _, p := range cands {
		ok := true
		for _, f := range fams {
			ok = ok && p.hasFamily(f.index())
		}
		if ok {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		if r.Pool != "" {
			return nil, addrs, 0, errorf(ErrFamilyUnavailable, "pool %q has no %s addresses for %s (%s)", r.Pool, famNames(fams), r.Key, r.Policy)
		}
		return nil, addrs, 0, errorf(ErrFamilyUnavailable, "no eligible auto-assign pool has %s addresses for %s (%s)", famNames(fams), r.Key, r.Policy)
	}
	if r.SharingKey != "" {
	shared:
		for _, p := range pools {
			for i, f := range fams {
				x, ok := a.shareable(r, p, f.index())
				if !ok {
					continue shared
				}
				addrs[i] = x
			}
			return p, addrs, len(fams), nil
		}
	}
	var missing Family
next:
	for _, p := range pools {
		for i, f := range fams {
			x, ok := netip.Addr{}, false
			if r.SharingKey != "" {
				x, ok = a.shareable(r, p, f.index())
			}
			if !ok {
				x, ok = p.firstFree(f.index())
			}
			if !ok {
				missing = f
				continue next
			}
			addrs[i] = x
		}
		return p, addrs, len(fams), nil
	}
	switch {
	case len(pools) == 1:
		return nil, addrs, 0, errorf(ErrPoolExhausted, "pool %q: no free %s address", pools[0].cfg.Name, missing)
	case len(fams) == 2:
		return nil, addrs, 0, errorf(ErrPoolExhausted, "no pool among %s has a free IPv4 and a free IPv6 address", joinPoolNames(pools))
	}
	return nil, addrs, 0, errorf(ErrPoolExhausted, "pools %s: no free %s address", joinPoolNames(pools), missing)
}

// shareable returns the lowest address of family fi in p that r can share with its holders:
// an address held by keys with r's sharing key, compatible ports and the same backend key.
// It costs O(size of the sharing group).
func (a *Allocator) shareable(r *request, p *poolState, fi int) (netip.Addr, bool) {
	var best netip.Addr
	for k := range a.sharing[r.SharingKey] {
		if k == r.Key {
			continue
		}
		for _, x := range a.keys[k].addrs() {
			if famIndex(x) != fi || (best.IsValid() && !x.Less(best)) || !p.covers(x) {
				continue
			}
			if a.checkHolders(r, p, []netip.Addr{x}) == nil {
				best = x
			}
		}
	}
	return best, best.IsValid()
}

// hold records that r.Key (which holds nothing) holds addrs from p.
func (a *Allocator) hold(r *request, p *poolState, addrs []netip.Addr) *holding {
	h := &holding{pool: p.cfg.Name, req: *r}
	h.self[0] = r.Key
	h.n = copy(h.buf[:], addrs)
	a.keys[r.Key] = h
	for _, x := range addrs {
		k := addrKey(x)
		hs := a.holders[k]
		if len(hs) == 0 {
			a.ps.setUsed(x, true)
			a.holders[k] = h.self[:] // shared, never written through: see forget
			continue
		}
		i, _ := slices.BinarySearch(hs, r.Key)
		list := make([]string, 0, len(hs)+1)
		list = append(append(append(list, hs[:i]...), r.Key), hs[i:]...)
		a.holders[k] = list
	}
	a.setRequest(h, r)
	return h
}

// setRequest records r as h's request, keeping the sharing index current.
func (a *Allocator) setRequest(h *holding, r *request) {
	if old := h.req.SharingKey; old != "" && old != r.SharingKey {
		a.unshare(old, r.Key)
	}
	if r.SharingKey != "" {
		g := a.sharing[r.SharingKey]
		if g == nil {
			g = make(map[string]struct{})
			a.sharing[r.SharingKey] = g
		}
		g[r.Key] = struct{}{}
	}
	if &h.req != r {
		h.req = *r
	}
	h.req.NamespaceLabels, h.req.ServiceLabels = nil, nil
}

func (a *Allocator) unshare(sharingKey, key string) {
	g := a.sharing[sharingKey]
	delete(g, key)
	if len(g) == 0 {
		delete(a.sharing, sharingKey)
	}
}

// forget drops whatever key holds. Holder lists are never modified in place (a
// single-holder list is the holding's own self array), only replaced.
func (a *Allocator) forget(key string) {
	h := a.keys[key]
	if h == nil {
		return
	}
	delete(a.keys, key)
	for _, x := range h.addrs() {
		k := addrKey(x)
		hs := a.holders[k]
		i, ok := slices.BinarySearch(hs, key)
		switch {
		case !ok:
		case len(hs) == 1:
			delete(a.holders, k)
			a.ps.setUsed(x, false)
		case len(hs) == 2:
			a.holders[k] = a.keys[hs[1-i]].self[:]
		default:
			a.holders[k] = slices.Delete(slices.Clone(hs), i, i+1)
		}
	}
	if h.req.SharingKey != "" {
		a.unshare(h.req.SharingKey, key)
	}
}
