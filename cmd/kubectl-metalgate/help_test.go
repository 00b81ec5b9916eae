package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHelp: help, -h and --help answer on standard output with exit 0 (as kubectl does);
// version and completion need no cluster; their misuse is a usage error on standard error.
func TestHelp(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantOut   string // standard output contains it ("" : standard output empty)
		wantErr   string // standard error contains it ("" : standard error empty)
		wantOutIs string // standard output is exactly it
	}{
		{name: "help", args: []string{"help"}, wantOutIs: usage},
		{name: "-h", args: []string{"-h"}, wantOutIs: usage},
		{name: "--help with kube flags", args: []string{"--context", "x", "--help"}, wantOutIs: usage},
		{name: "help pools", args: []string{"help", "pools"}, wantOutIs: poolsHelp},
		{name: "pools -h", args: []string{"pools", "-h"}, wantOutIs: poolsHelp},
		{name: "--help before backends, no TARGET", args: []string{"--help", "backends"}, wantOutIs: backendsHelp},
		{name: "backends TARGET -h", args: []string{"backends", "web", "-n", "shop", "-h"}, wantOutIs: backendsHelp},
		{name: "migrate -h", args: []string{"migrate", "-h"}, wantOutIs: migrateHelp},
		{name: "help help", args: []string{"help", "help"}, wantOutIs: helpHelp},
		{name: "help completion", args: []string{"help", "completion"}, wantOutIs: completionHelp},
		{name: "completion -h", args: []string{"completion", "-h"}, wantOutIs: completionHelp},
		{name: "help of an unknown command", args: []string{"help", "frob"}, wantCode: 2, wantErr: `help: unknown command "frob"`},
		{name: "-h of an unknown command", args: []string{"frob", "-h"}, wantCode: 2, wantErr: `help: unknown command "frob"`},
		{name: "help of two", args: []string{"help", "pools", "check"}, wantCode: 2, wantErr: `help: unexpected argument "check"`},
		{name: "help with a bad flag", args: []string{"help", "--frob"}, wantCode: 2, wantErr: "unknown flag: --frob"},
		{name: "version", args: []string{"version"}, wantOut: "kubectl-metalgate "},
		{name: "version with an argument", args: []string{"version", "x"}, wantCode: 2, wantErr: `version: unexpected argument "x"`},
		{name: "completion bash", args: []string{"completion", "bash"}, wantOut: "complete -o default -F _kubectl_metalgate kubectl-metalgate\n"},
		{name: "completion zsh", args: []string{"completion", "zsh"}, wantOut: "#compdef kubectl-metalgate\n"},
		{name: "completion fish", args: []string{"completion", "fish"}, wantCode: 2, wantErr: `completion: unknown shell "fish"; allowed: bash, zsh`},
		{name: "completion without a shell", args: []string{"completion"}, wantCode: 2, wantErr: "completion: want one argument, bash or zsh; got 0"},
		{name: "__complete", args: []string{"__complete", "pools", "--out"}, wantOutIs: "--output\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			// A connect that fails the test: none of these may reach for a cluster.
			noConnect := func(options) (*env, error) { t.Error("connected to a cluster"); return nil, os.ErrInvalid }
			if code := runWith(context.Background(), tc.args, &out, &errOut, noConnect); code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.wantCode, errOut.String())
			}
			if tc.wantOutIs != "" {
				if diff := cmp.Diff(tc.wantOutIs, out.String()); diff != "" {
					t.Errorf("stdout (-want +got):\n%s", diff)
				}
			} else if !strings.Contains(out.String(), tc.wantOut) || (tc.wantOut == "" && out.Len() > 0) {
				t.Errorf("stdout %q, want it to contain %q", out.String(), tc.wantOut)
			}
			if !strings.Contains(errOut.String(), tc.wantErr) || (tc.wantErr == "" && errOut.Len() > 0) {
				t.Errorf("stderr %q, want it to contain %q", errOut.String(), tc.wantErr)
			}
		})
	}
}

// TestHelpNamesRealFlags: every --flag a help text names is a flag the plugin takes, so that
// help cannot drift from the parser; every command has its help.
func TestHelpNamesRealFlags(t *testing.T) {
	var o options
	fs, _, _ := newFlagSet(&o)
	flag := regexp.MustCompile(`(?:^|[\s(\[,])--([a-z][a-z-]*)`)
	topics := []string{"", "help", "version", "completion"}
	for name := range commands() {
		topics = append(topics, name)
	}
	for _, topic := range topics {
		text, ok := helpText(commands(), topic)
		if !ok || !strings.Contains(text, "Usage:") {
			t.Errorf("help %q: ok %t, text %q", topic, ok, text)
		}
		for _, m := range flag.FindAllStringSubmatch(text, -1) {
			if m[1] == "nginx-annotations" { // the proxy's flag, named in migrate's text
				continue
			}
			if fs.Lookup(m[1]) == nil {
				t.Errorf("help %q names --%s, which is no flag", topic, m[1])
			}
		}
	}
}

func TestVersionString(t *testing.T) {
	tests := []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"stamped wins", "v0.1.0", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.9"}}, true, "kubectl-metalgate v0.1.0 (go1.26.0)\n"},
		{"module version", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.2.0"}}, true, "kubectl-metalgate v0.2.0 (go1.26.0)\n"},
		{"no module version", "", &debug.BuildInfo{GoVersion: "go1.26.0"}, true, "kubectl-metalgate (devel) (go1.26.0)\n"},
		{"no build info", "", nil, false, "kubectl-metalgate (devel) (unknown)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionString(tc.stamped, tc.info, tc.ok); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestComplete(t *testing.T) {
	var o options
	fs, _, _ := newFlagSet(&o)
	tests := []struct {
		words []string
		want  []string
	}{
		{nil, []string{"allocations", "announcers", "backends", "check", "completion", "help", "migrate", "pools", "version"}},
		{[]string{"a"}, []string{"allocations", "announcers"}},
		{[]string{"--context", "a"}, nil}, // a context name, not a command
		{[]string{"--context", "x", "a"}, []string{"allocations", "announcers"}},
		{[]string{"-n", "shop", "p"}, []string{"pools"}},
		{[]string{"pools", ""}, nil}, // pools takes no argument to complete
		{[]string{"pools", "-o", ""}, []string{"json", "wide", "yaml"}},
		{[]string{"pools", "--output", "y"}, []string{"yaml"}},
		{[]string{"pools", "--all"}, []string{"--all-namespaces"}},
		{[]string{"allocations", "--metalgate"}, []string{"--metalgate-namespace"}},
		{[]string{"-A", "al"}, []string{"allocations"}}, // -A takes no value
		{[]string{"help", "m"}, []string{"migrate"}},
		{[]string{"help", "he"}, nil},
		{[]string{"completion", ""}, []string{"bash", "zsh"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			if got := complete(commands(), fs, tc.words); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBuiltBinary builds the plugin as the release does (version stamped with
// -X main.version=) and runs it: version says the stamp, and the bash completion script,
// sourced in a real bash, completes commands, flags and -o values through the binary.
func TestBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubectl-metalgate")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "kubectl-metalgate v9.8.7-test (go") {
		t.Errorf("version: %q, %v", out, err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	tests := []struct {
		line string // the words typed, the last one being completed
		want []string
	}{
		{"kubectl-metalgate al", []string{"allocations"}},
		{"kubectl-metalgate pools -o ''", []string{"json", "wide", "yaml"}},
		{"kubectl-metalgate allocations --all-n", []string{"--all-namespaces"}},
		{"kubectl-metalgate completion ''", []string{"bash", "zsh"}},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			script := `source <(kubectl-metalgate completion bash)
COMP_WORDS=(` + tc.line + `); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_kubectl_metalgate
printf '%s\n' "${COMPREPLY[@]}"`
			cmd := exec.Command(bash, "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("bash: %v", err)
			}
			if got := strings.Fields(string(out)); !slices.Equal(got, tc.want) {
				t.Errorf("COMPREPLY %q, want %q", got, tc.want)
			}
		})
	}
}
