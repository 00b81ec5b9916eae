package lab

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The end of n3's kubelet log from issue #18 (shortened), after an earlier run.
const raceLog = `==== 2026-01-02T10:00:00Z lab: starting /bin/kubelet --config=/lab/n3/kubelet.yaml
E0102 10:00:01.000000    4242 kubelet.go:1] "Old error from an earlier run"
==== 2026-01-02T11:00:00Z lab: starting /bin/kubelet --config=/lab/n3/kubelet.yaml
I0102 11:00:01.000000    5151 server.go:1] "Starting device plugin registration server"
E0102 11:00:01.100000    5151 server.go:110] "Failed to listen to socket while starting device plugin registry" err="listen unix /var/lib/kubelet/device-plugins/kubelet.sock: bind: address already in use"
E0102 11:00:01.100100    5151 kubelet.go:1745] "Failed to start ContainerManager" err="listen unix /var/lib/kubelet/device-plugins/kubelet.sock: bind: address already in use"
`

func TestLastErrors(t *testing.T) {
	tests := []struct {
		name string
		log  string
		max  int
		want []string
	}{
		{name: "errors of the last run only", log: raceLog, max: 6, want: []string{
			`E0102 11:00:01.100000    5151 server.go:110] "Failed to listen to socket while starting device plugin registry" err="listen unix /var/lib/kubelet/device-plugins/kubelet.sock: bind: address already in use"`,
			`E0102 11:00:01.100100    5151 kubelet.go:1745] "Failed to start ContainerManager" err="listen unix /var/lib/kubelet/device-plugins/kubelet.sock: bind: address already in use"`,
		}},
		{name: "at most max", log: raceLog, max: 1, want: []string{
			`E0102 11:00:01.100100    5151 kubelet.go:1745] "Failed to start ContainerManager" err="listen unix /var/lib/kubelet/device-plugins/kubelet.sock: bind: address already in use"`,
		}},
		{name: "no errors: the last lines", log: "==== start\nline 1\nline 2\nline 3\n", max: 2, want: []string{"line 2", "line 3"}},
		{name: "containerd", log: `time="x" level=info msg=a` + "\n" + `time="x" level=error msg="failed to load cni"` + "\n", max: 5,
			want: []string{`time="x" level=error msg="failed to load cni"`}},
		{name: "empty", log: "", max: 5, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, lastErrors([]byte(tc.log), tc.max)); diff != "" {
				t.Errorf("lastErrors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchCauses(t *testing.T) {
	tests := []struct {
		name          string
		line          string
		wantTransient []bool // one per cause found
		wantText      string
	}{
		{name: "device-plugin race", line: lastErrors([]byte(raceLog), 1)[0], wantTransient: []bool{true}, wantText: "issue #18"},
		{name: "port taken", line: `E0102 "listen tcp [::]:27000: bind: address already in use"`, wantTransient: []bool{false}, wantText: "LAB_PORT_BASE"},
		{name: "inotify", line: `E0102 "inotify_init: too many open files"`, wantTransient: []bool{false}, wantText: "max_user_instances"},
		{name: "slow API server", line: `E0102 "Unable to register node" err="Post https://198.51.100.2:27000/api/v1/nodes: net/http: TLS handshake timeout"`, wantTransient: []bool{true}, wantText: "busy"},
		{name: "unknown", line: `E0102 "something else"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := matchCauses([]string{tc.line, tc.line})
			var transient []bool
			for _, kc := range got {
				transient = append(transient, kc.transient)
			}
			if len(transient) != len(tc.wantTransient) || (len(got) > 0 && (got[0].transient != tc.wantTransient[0] || !strings.Contains(got[0].explain, tc.wantText))) {
				t.Errorf("matchCauses(%q) = %+v, want transient %v mentioning %q", tc.line, got, tc.wantTransient, tc.wantText)
			}
		})
	}
}
