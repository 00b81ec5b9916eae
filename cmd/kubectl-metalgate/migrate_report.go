package main

import (
	"fmt"
	"io"
	"strings"
)

// verdict is how one field or annotation of a migrated object maps.
type verdict int

const (
	// same: metalgate does what MetalLB or ingress-nginx did, under the same or a new name.
	same verdict = iota
	// changed: it maps, but something differs; the detail says what.
	changed
	// unsupported: metalgate has no equivalent; the detail says what happens to it.
	unsupported
	// refused: metalgate refuses it on purpose (ingress-nginx's snippets); the detail says why.
	refused
	// breaking: a protection the object had is lost, or clients it let in are refused: an
	// authentication or address list the proxy cannot enforce (it then refuses the Ingress),
	// a default of ingress-nginx's ConfigMap metalgate does not have. Listed again under the
	// BREAKING heading; --strict fails on any.
	breaking
)

func (v verdict) String() string {
	return [...]string{"one to one", "changed", "unsupported", "refused", "BREAKING"}[v]
}

// entry is one line of an object's report: a field or an annotation and how it maps.
type entry struct {
	verdict verdict
	what    string // spec.holdTime, nginx.ingress.kubernetes.io/rewrite-target, …
	detail  string
}

// objectReport is what migrate did with one object.
type objectReport struct {
	// title names the object as it is printed: "IPAddressPool metalgate-system/production".
	title string
	// from says where it came from: "metallb.io/v1beta1 metallb-system/production, file x.yaml".
	from    string
	entries []entry
}

func (r *objectReport) add(v verdict, what, format string, args ...any) {
	r.entries = append(r.entries, entry{verdict: v, what: what, detail: fmt.Sprintf(format, args...)})
}

// worst is the most severe verdict of the object's entries (same when it has none).
func (r *objectReport) worst() verdict {
	w := same
	for _, e := range r.entries {
		w = max(w, e.verdict)
	}
	return w
}

// skip is an object migrate read and did not migrate, with the reason.
type skip struct{ object, reason string }

// report is everything migrate has to say, printed after the manifests.
type report struct {
	// header lines: the mappings applied to every object.
	header   []string
	objects  []*objectReport
	services []*objectReport // Services that keep working thanks to the annotation aliases
	skipped  []skip
	// controller is ingress-nginx's controller ConfigMap and the proxy flags it asks for; nil
	// when nothing of ingress-nginx was read.
	controller *controllerConfig
}

// all is every report block with entries: the objects, the Services, the controller ConfigMap.
func (r *report) all() []*objectReport {
	out := append(r.objects[:len(r.objects):len(r.objects)], r.services...)
	if r.controller != nil && r.controller.rep != nil {
		out = append(out, r.controller.rep)
	}
	return out
}

// write prints the report: the header, one block per migrated object, the Services, what was
// not migrated, and a summary line.
func (r *report) write(w io.Writer) error {
	var b strings.Builder
	b.WriteString("kubectl metalgate migrate report\n")
	for _, h := range r.header {
		b.WriteString(h + "\n")
	}
	if n := r.breaking(); n > 0 {
		fmt.Fprintf(&b, "\nBREAKING: %d item(s) where metalgate would protect less than ingress-nginx did, or refuse what it served; fix them before applying (--strict exits %d on any)\n", n, exitBreaking)
		for _, o := range r.all() {
			for _, e := range o.entries {
				if e.verdict == breaking {
					fmt.Fprintf(&b, "  %s: %s: %s\n", o.title, e.what, e.detail)
				}
			}
		}
	}
	block := func(o *objectReport) {
		fmt.Fprintf(&b, "\n%s", o.title)
		if o.from != "" {
			fmt.Fprintf(&b, " (from %s)", o.from)
		}
		b.WriteString("\n")
		if len(o.entries) == 0 {
			b.WriteString("  one to one\n")
		}
		for _, e := range o.entries {
			line := e.what
			if e.detail != "" {
				line += ": " + e.detail
			}
			fmt.Fprintf(&b, "  %-12s %s\n", e.verdict, line)
		}
	}
	writeControllerConfig(&b, r.controller)
	for _, o := range r.objects {
		block(o)
	}
	if len(r.services) > 0 {
		b.WriteString("\nServices (not printed: the controller reads MetalLB's annotations as they are)\n")
		for _, o := range r.services {
			block(o)
		}
	}
	if len(r.skipped) > 0 {
		b.WriteString("\nNot migrated\n")
		for _, s := range r.skipped {
			fmt.Fprintf(&b, "  %s: %s\n", s.object, s.reason)
		}
	}
	var n [5]int
	for _, o := range r.objects {
		n[o.worst()]++
	}
	var lost, refusedN int
	for _, o := range r.all() {
		for _, e := range o.entries {
			if e.verdict == unsupported || e.verdict == refused {
				lost++
			}
			if e.verdict == refused {
				refusedN++
			}
		}
	}
	fmt.Fprintf(&b, "\nSummary: %d object(s) migrated: %d one to one, %d with changes, %d with something unsupported, %d with something BREAKING; %d not migrated; %d field(s), annotation(s) or key(s) not supported (%d refused); %d BREAKING item(s)\n",
		len(r.objects), n[same], n[changed], n[unsupported]+n[refused], n[breaking], len(r.skipped), lost, refusedN, r.breaking())
	_, err := io.WriteString(w, b.String())
	return err
}

// breaking counts the BREAKING entries of every object and Service.
func (r *report) breaking() int {
	n := 0
	for _, o := range r.all() {
		for _, e := range o.entries {
			if e.verdict == breaking {
				n++
			}
		}
	}
	return n
}
