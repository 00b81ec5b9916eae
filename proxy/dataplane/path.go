package dataplane

import (
	"errors"
	"strings"
)

// Path normalisation. A request is routed, and forwarded, by its normalised path, so that a
// backend never sees a path that names another route than the one that admitted it
// ("/public/../admin" would otherwise pass the "/public" rule and reach "/admin" at a backend
// that resolves dot-segments itself). The steps, on the escaped path as the client sent it:
//
//  1. encoded '/' and '\' (%2F, %5C) and a bare '\' are refused (EscapedSlashesReject,
//     the default, as Envoy recommends), passed on as sent (EscapedSlashesKeep: for
//     backends that treat %2F as data; the router matches the decoded path, so this is
//     unsafe with a backend that decodes %2F before it resolves dot-segments), or decoded
//     (EscapedSlashesDecode: they become '/', so "/a%5C..%5Cb" is "/b");
//  2. %-escapes of unreserved characters (RFC 3986 §2.3: ALPHA DIGIT - . _ ~) are decoded,
//     and the hex digits of the others upper-cased (RFC 3986 §6.2.2), so "%2e%2e" is "..";
//  3. runs of '/' become one (MergeSlashes, default on);
//  4. dot-segments are removed (RFC 3986 §5.2.4); ".." never climbs above the root.
//
// A path that does not start with '/' (OPTIONS *, or a malformed target) is left alone.

// EscapedSlashes is the policy for an encoded '/' or '\' (and a bare '\') in a request path.
type EscapedSlashes string

const (
	EscapedSlashesReject EscapedSlashes = "reject" // 400 Bad Request (default)
	EscapedSlashesKeep   EscapedSlashes = "keep"   // forwarded as sent; routed by the decoded path
	EscapedSlashesDecode EscapedSlashes = "decode" // %2F and %5C and '\' become '/', then normalised
)

var (
	errEscapedSlash = errors.New("encoded '/' or '\\' in the path")
	errBadEscape    = errors.New("malformed %-escape in the path")
)

// pathPolicy is how normalizePath treats a path.
type pathPolicy struct {
	slashes      EscapedSlashes
	mergeSlashes bool
}

// normalizePath returns the normalised escaped path of raw (an escaped path: no query), and
// whether it differs from raw. The common path (no '%', '\', "//" or dot-segment) costs one
// scan and no allocation.
func (p pathPolicy) normalizePath(raw string) (string, bool, error) {
	if raw == "" || raw[0] != '/' {
		return raw, false, nil
	}
	if !needsNormalizing(raw, p.mergeSlashes) {
		return raw, false, nil
	}
	// Steps 1 and 2: escapes.
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '\\':
			switch p.slashes {
			case EscapedSlashesReject:
				return "", false, errEscapedSlash
			case EscapedSlashesDecode:
				c = '/'
			}
			b.WriteByte(c)
		case c == '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return "", false, errBadEscape
			}
			d := unhex(raw[i+1])<<4 | unhex(raw[i+2])
			i += 2
			switch {
			case d == '/' || d == '\\':
				switch p.slashes {
				case EscapedSlashesReject:
					return "", false, errEscapedSlash
				case EscapedSlashesDecode:
					b.WriteByte('/')
				default:
					writeEscape(&b, d)
				}
			case unreserved(d):
				b.WriteByte(d)
			default:
				writeEscape(&b, d)
			}
		default:
			b.WriteByte(c)
		}
	}
	out := removeDotSegments(b.String(), p.mergeSlashes)
	return out, out != raw, nil
}

// needsNormalizing is the cheap test: does raw hold anything normalizePath would change?
func needsNormalizing(raw string, merge bool) bool {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '%', '\\':
			return true
		case '/':
			if i+1 < len(raw) {
				switch raw[i+1] {
				case '/':
					if merge {
						return true
					}
				case '.':
					// "/." then end, '/', or another '.' (then end or '/').
					rest := raw[i+2:]
					if rest == "" || rest[0] == '/' || rest[0] == '.' && (len(rest) == 1 || rest[1] == '/') {
						return true
					}
				}
			}
		}
	}
	return false
}

// removeDotSegments applies RFC 3986 §5.2.4 to an absolute path, merging empty segments
// when merge is set. The result starts with '/' and keeps a trailing '/' (also after a final
// "." or "..", as the RFC's algorithm does).
func removeDotSegments(path string, merge bool) string {
	segs := make([]string, 0, strings.Count(path, "/"))
	trailing := false
	for rest := path[1:]; ; {
		seg, next, more := strings.Cut(rest, "/")
		trailing = false
		switch seg {
		case ".":
			trailing = true
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			trailing = true
		case "":
			if !more {
				trailing = true // "/a/" ends with an empty segment: keep the slash
			} else if !merge {
				segs = append(segs, seg)
			}
		default:
			segs = append(segs, seg)
		}
		if !more {
			break
		}
		rest = next
	}
	out := "/" + strings.Join(segs, "/")
	if trailing && len(segs) > 0 {
		out += "/"
	}
	return out
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func writeEscape(b *strings.Builder, c byte) {
	const hexUpper = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(hexUpper[c>>4])
	b.WriteByte(hexUpper[c&15])
}
