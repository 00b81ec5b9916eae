package lab

import (
	"errors"
	"testing"
)

func TestNodeHostPath(t *testing.T) {
	c := Config{Dir: "/lab"}
	tests := []struct {
		node, path, want string
		wantErr          bool
	}{
		{node: "n1", path: "/var/lib/kubelet/device-plugins/kubelet.sock", want: "/lab/n1/host/var/lib/kubelet/device-plugins/kubelet.sock"},
		{node: "n3", path: "/var/log/containers/x.log", want: "/lab/n3/host/var/log/containers/x.log"},
		{node: "n1", path: "/var/library/x", wantErr: true},
		{node: "n1", path: "/run/containerd/s/x", wantErr: true},
		{node: "n9", path: "/var/lib/cni", wantErr: true},
	}
	for _, tc := range tests {
		got, err := c.NodeHostPath(tc.node, tc.path)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("NodeHostPath(%s, %s) = %q, %v; want %q, error %v", tc.node, tc.path, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestCheckViewable(t *testing.T) {
	for dir, ok := range map[string]bool{
		"/work/main/_out/lab-mg-": true,
		"/root/x/_out/lab-mg-":    true,
		"/var/library/lab":        true,
		"/var/lib/lab":            false,
		"/var/log":                false,
		"/tmp/a,b":                false,
		"/tmp/a:b":                false,
	} {
		if err := (Config{Dir: dir}).checkViewable(); (err == nil) != ok {
			t.Errorf("checkViewable(%s) = %v, want ok=%v", dir, err, ok)
		}
	}
}

func TestCheckMountinfo(t *testing.T) {
	c := Config{Dir: "/lab"}
	const (
		root     = "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
		varLib   = "600 22 0:90 / /var/lib rw,relatime - overlay overlay rw,lowerdir=/var/lib,upperdir=/lab/n1/host/var/lib,workdir=/lab/n1/host/.work/var-lib\n"
		varLog   = "601 22 0:91 / /var/log rw,relatime - overlay overlay rw,lowerdir=/var/log,upperdir=/lab/n1/host/var/log,workdir=/lab/n1/host/.work/var-log\n"
		optional = "601 22 0:91 / /var/log rw,relatime shared:5 master:1 - overlay overlay rw,lowerdir=/var/log,upperdir=/lab/n1/host/var/log,workdir=/lab/n1/host/.work/var-log\n"
	)
	tests := []struct {
		name, node, mountinfo string
		ok                    bool
	}{
		{name: "both overlays", node: "n1", mountinfo: root + varLib + varLog, ok: true},
		{name: "optional fields", node: "n1", mountinfo: root + varLib + optional, ok: true},
		{name: "root namespace", node: "n1", mountinfo: root},
		{name: "only /var/lib", node: "n1", mountinfo: root + varLib},
		{name: "another node's", node: "n2", mountinfo: root + varLib + varLog},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.checkMountinfo(tc.node, []byte(tc.mountinfo))
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrNoView)) {
				t.Errorf("checkMountinfo = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
