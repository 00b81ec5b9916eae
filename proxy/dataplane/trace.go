package dataplane

import "net/http"

// W3C Trace Context (https://www.w3.org/TR/trace-context/), propagation only: a client's
// valid traceparent goes to the backend unchanged, with its tracestate; an invalid one is
// not forwarded (a backend would start a trace from a malformed parent, or fail), nor is a
// tracestate without a valid traceparent (§3.3.1: it means nothing alone). The proxy does
// not start traces of its own: without a traceparent the backend sees none; the request ID
// (X-Request-Id) ties the proxy's access log line to the backend's logs.

// maxTracestate is the longest tracestate forwarded (the spec asks every hop to pass at
// least 512 characters; longer lists are dropped whole rather than cut).
const maxTracestate = 512

// w3cTrace returns h's traceparent and tracestate when the traceparent is valid (one field,
// well formed), else "" for both; a tracestate that is not printable ASCII or longer than
// maxTracestate is dropped alone. Several tracestate fields are joined with ",", as §3.3.1.1
// allows.
func w3cTrace(h http.Header) (traceparent, tracestate string) {
	tp := h["Traceparent"]
	if len(tp) != 1 || !validTraceparent(tp[0]) {
		return "", ""
	}
	ts := h["Tracestate"]
	switch len(ts) {
	case 0:
		return tp[0], ""
	case 1:
		tracestate = ts[0]
	default:
		n := 0
		for _, v := range ts {
			n += len(v) + 1
		}
		if n > maxTracestate+1 {
			return tp[0], ""
		}
		b := make([]byte, 0, n)
		for i, v := range ts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, v...)
		}
		tracestate = string(b)
	}
	if len(tracestate) > maxTracestate {
		return tp[0], ""
	}
	for i := 0; i < len(tracestate); i++ {
		if c := tracestate[i]; c < 0x20 || c > 0x7e {
			return tp[0], ""
		}
	}
	return tp[0], tracestate
}

// validTraceparent checks "version-traceid-parentid-flags" (§3.2): two, 32, 16 and two lower
// hex digits; version ff is invalid, trace and parent IDs of all zeros are invalid. Version
// 00 is exactly 55 characters; a later version may carry more after a '-' (§3.2.4).
func validTraceparent(v string) bool {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	if !lowerHex(v[0:2]) || !lowerHex(v[3:35]) || !lowerHex(v[36:52]) || !lowerHex(v[53:55]) {
		return false
	}
	switch {
	case v[0:2] == "ff":
		return false
	case v[0:2] == "00" && len(v) != 55:
		return false
	case len(v) > 55 && v[55] != '-':
		return false
	}
	return !allZero(v[3:35]) && !allZero(v[36:52])
}

// traceID is the trace ID of a valid traceparent ("" for none).
func traceID(traceparent string) string {
	if traceparent == "" {
		return ""
	}
	return traceparent[3:35]
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
