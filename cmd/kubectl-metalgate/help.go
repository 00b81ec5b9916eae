package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// version is the plugin's release version, stamped by the release build with
// -ldflags "-X main.version=v0.1.0"; empty, the module version of the build info is said.
var version string

// Help texts of each command (help CMD, CMD -h), on standard output.
const (
	kubeFlagsHelp = `
kubectl's flags (--kubeconfig, --context, --as, --token, --server, ...) and
--metalgate-namespace apply to every command: kubectl metalgate help.
`
	poolsHelp = `Usage: kubectl metalgate pools [-o json|yaml|wide] [--metalgate-namespace NS]

Usage of every IPAddressPool in metalgate's namespace, one row per pool and family:
assigned and available addresses (from the pool's status), auto-assign, the blocks, and
problems (Overlap reasons, Invalid).

Flags:
  -o, --output FORMAT   json, yaml (a PoolList) or wide (+ AVOID-BUGGY-IPS,
                        ADDRESS-SHARING, PRIORITY)
` + kubeFlagsHelp
	allocationsHelp = `Usage: kubectl metalgate allocations [-n NS | -A] [-o json|yaml|wide]

Every LoadBalancer Service: its address, the pool it came from, who announces it (from the
speakers; "-" unknown), its class and traffic policy. A Service metalgate made for a Gateway
names the Gateway.

Flags:
  -n, --namespace NS      only the Services of NS (default: every namespace)
  -A, --all-namespaces    every namespace (the default)
  -o, --output FORMAT     json, yaml (an AllocationList) or wide (+ PORTS, IP-FAMILIES)
  --debug-reader SA       the ServiceAccount whose token reads the speakers
` + kubeFlagsHelp
	announcersHelp = `Usage: kubectl metalgate announcers [-n NS | -A] [-o json|yaml|wide]

Per VIP, from the speakers themselves: its Service (and the Gateway it serves), the node
announcing it by layer 2 (and interface) or the nodes announcing it by BGP (and peers).
Warns about a VIP two nodes announce by layer 2, a VIP of a pool no node announces, and
speakers that did not answer.

Flags:
  -n, --namespace NS      only the VIPs of NS's Services (warnings stay cluster-wide)
  -A, --all-namespaces    every namespace (the default)
  -o, --output FORMAT     json, yaml (an AnnouncerList; warnings on standard error) or
                          wide (+ POOL)
  --debug-reader SA       the ServiceAccount whose token reads the speakers
` + kubeFlagsHelp
	backendsHelp = `Usage: kubectl metalgate backends TARGET [-n NS] [-o json|yaml]

The live routing table of the proxies serving TARGET: rules, backends, endpoints, health.
TARGET is an Ingress (NAME, NAMESPACE/NAME; ingress/ in front is optional), or
httproute/NAME or grpcroute/NAME (KIND/NAMESPACE/NAME too): a route as the proxies of the
Gateways its parentRefs name route it.

Flags:
  -n, --namespace NS   TARGET's namespace when TARGET does not say it (default: the
                       kubeconfig context's)
  -o, --output FORMAT  json or yaml: a BackendList, one item per answering proxy (other
                       lines on standard error); wide is the table
` + kubeFlagsHelp
	checkHelp = `Usage: kubectl metalgate check [--metalgate-namespace NS]

Configuration problems, each with a hint: overlapping or invalid pools, pools nothing
announces, Services without an address or with one in no pool, Ingresses no proxy serves or
whose class names no IngressClass, Ingress status conflicts. Exits 1 when it finds any.
` + kubeFlagsHelp
	migrateHelp = `Usage: kubectl metalgate migrate [-f FILE|DIR|-]... [flags]

metalgate manifests (standard output) for the MetalLB objects and ingress-nginx Ingresses of
the cluster or of -f, and a report (standard error) of what maps, what changes, what does not.
Applies nothing (docs/migrate.md). MetalLB's objects go to --metalgate-namespace.

Flags:
  -f, --filename FILE|DIR|-   read manifests (YAML or JSON, Lists too) instead of the cluster;
                              repeatable; a DIR's *.yaml, *.yml and *.json
  --report FILE               write the report to FILE instead of standard error
  --strict                    exit 3 when the report has a BREAKING item
  --metallb-namespace NS      MetalLB's namespace (default metallb-system)
  --nginx-class NAMES         IngressClass names ingress-nginx serves (default nginx)
  --ingress-class NAME        the class migrated Ingresses get (default metalgate)
  --rewrite-annotations       nginx.ingress.kubernetes.io annotations to metalgate.io
                              (default true)
  --drop-unsupported          leave out nginx annotations metalgate does not support
  --nginx-configmap NS/NAME   ingress-nginx's controller ConfigMap (default: the one
                              its controller Deployment names, else
                              ingress-nginx/ingress-nginx-controller)
` + kubeFlagsHelp
	helpHelp = `Usage: kubectl metalgate help [COMMAND]

Help for the plugin, or for COMMAND (the same as kubectl metalgate COMMAND -h).
`
	versionHelp = `Usage: kubectl metalgate version

The plugin's version.
`
	completionHelp = `Usage: kubectl metalgate completion bash|zsh

A shell script that completes the plugin's commands, flags and -o values:

  source <(kubectl-metalgate completion bash)   # bash: kubectl-metalgate <TAB>
  source <(kubectl-metalgate completion zsh)    # zsh

For kubectl metalgate <TAB> (kubectl 1.26 and later), put an executable named
kubectl_complete-metalgate on your PATH that runs: kubectl-metalgate __complete "$@"
`
)

// helpText is the help of topic: a command's, help's, version's, completion's, or the
// plugin's ("").
func helpText(commands map[string]command, topic string) (string, bool) {
	switch topic {
	case "":
		return usage, true
	case "help":
		return helpHelp, true
	case "version":
		return versionHelp, true
	case "completion":
		return completionHelp, true
	}
	c, ok := commands[topic]
	return c.help, ok
}

// versionString is what version prints: the stamped version, else the module's (a
// "go install ...@v0.1.0" build), else "(devel)".
func versionString(stamped string, info *debug.BuildInfo, ok bool) string {
	v := stamped
	if v == "" && ok && info.Main.Version != "" {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	goVersion := "unknown"
	if ok {
		goVersion = info.GoVersion
	}
	return fmt.Sprintf("kubectl-metalgate %s (%s)\n", v, goVersion)
}

// completionWords are what the shell completes: the commands, and the flags of fs (long
// forms and shorthands; hidden ones left out), sorted.
func completionWords(commands map[string]command, fs *pflag.FlagSet) (cmds, flags []string) {
	for name := range commands {
		cmds = append(cmds, name)
	}
	cmds = append(cmds, "help", "version", "completion")
	slices.Sort(cmds)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		flags = append(flags, "--"+f.Name)
		if f.Shorthand != "" {
			flags = append(flags, "-"+f.Shorthand)
		}
	})
	slices.Sort(flags)
	return cmds, flags
}

// complete answers the completion of the last of words (the words after the plugin's name,
// the last one being typed, maybe ""): the commands, help's commands, completion's shells,
// -o's formats, or the flags. A flag's other values (names, files) are not completed.
func complete(commands map[string]command, fs *pflag.FlagSet, words []string) []string {
	cmds, flags := completionWords(commands, fs)
	if len(words) == 0 {
		words = []string{""}
	}
	cur := words[len(words)-1]
	prev := ""
	if len(words) > 1 {
		prev = words[len(words)-2]
	}
	var candidates []string
	switch {
	case prev == "-o" || prev == "--output":
		candidates = []string{"json", "wide", "yaml"}
	case strings.HasPrefix(cur, "-"):
		candidates = flags
	case takesValue(fs, prev):
		return nil
	default:
		command := ""
		for i, w := range words[:len(words)-1] {
			if !strings.HasPrefix(w, "-") && (i == 0 || !takesValue(fs, words[i-1])) {
				command = w
				break
			}
		}
		switch command {
		case "":
			candidates = cmds
		case "help":
			candidates = slices.DeleteFunc(slices.Clone(cmds), func(c string) bool { return c == "help" })
		case "completion":
			candidates = []string{"bash", "zsh"}
		}
	}
	var out []string
	for _, c := range candidates {
		if strings.HasPrefix(c, cur) {
			out = append(out, c)
		}
	}
	return out
}

// takesValue says word is a flag of fs that takes a value in the next word.
func takesValue(fs *pflag.FlagSet, word string) bool {
	var f *pflag.Flag
	switch {
	case strings.HasPrefix(word, "--") && !strings.Contains(word, "="):
		f = fs.Lookup(word[2:])
	case len(word) == 2 && word[0] == '-':
		f = fs.ShorthandLookup(word[1:])
	}
	return f != nil && f.NoOptDefVal == ""
}

// writeCompletion writes the completion script for shell: bash or zsh. Both ask the plugin
// (kubectl-metalgate __complete WORDS...), so they complete what this build takes.
func writeCompletion(out io.Writer, shell string) error {
	switch shell {
	case "bash":
		_, err := io.WriteString(out, `# bash completion for kubectl-metalgate: source <(kubectl-metalgate completion bash)
_kubectl_metalgate() {
    local IFS=$'\n'
    COMPREPLY=($("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _kubectl_metalgate kubectl-metalgate
`)
		return err
	case "zsh":
		_, err := io.WriteString(out, `#compdef kubectl-metalgate
# zsh completion for kubectl-metalgate: source <(kubectl-metalgate completion zsh)
_kubectl_metalgate() {
    local -a candidates
    candidates=("${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    compadd -a candidates
}
if [[ -n ${ZSH_VERSION-} ]] && (( $+functions[compdef] )); then
    compdef _kubectl_metalgate kubectl-metalgate
fi
`)
		return err
	}
	return fmt.Errorf("completion: unknown shell %q; allowed: bash, zsh", shell)
}
