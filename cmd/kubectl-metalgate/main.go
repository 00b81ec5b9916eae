// Command kubectl-metalgate is the kubectl plugin of metalgate: `kubectl metalgate pools`,
// `allocations`, `announcers`, `backends` and `check` read the cluster (and, through the API
// server's pods/portforward, the speakers and ingress proxies) and explain what metalgate did
// and why; `migrate` translates MetalLB objects and ingress-nginx Ingresses.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

const usage = `kubectl metalgate: what metalgate allocated, announces and routes, and why.

Usage:
  kubectl metalgate pools             usage of every IPAddressPool, per family
  kubectl metalgate allocations       Service -> address -> pool -> announcer
  kubectl metalgate announcers        per VIP: its Service (and the Gateway it serves), the node
                                      announcing it by layer 2 (and interface) or the nodes
                                      announcing it by BGP (and peers), from the speakers
  kubectl metalgate backends TARGET   the live routing table of the proxies serving TARGET:
                                      rules, backends, endpoints, health. TARGET is an Ingress
                                      (NAME with -n, or NAMESPACE/NAME; ingress/ in front is
                                      optional), httproute/NAME or grpcroute/NAME (with -n, or
                                      KIND/NAMESPACE/NAME): an HTTPRoute or GRPCRoute as the
                                      proxies of the Gateways its parentRefs name route it
  kubectl metalgate check             configuration problems: overlapping or invalid pools, pools
                                      nothing announces, pending Services, Ingresses no proxy
                                      serves, Ingress status conflicts; exits 1 when it finds any
  kubectl metalgate migrate           metalgate manifests (stdout) for the MetalLB objects and
                                      ingress-nginx Ingresses of the cluster or of -f, and a
                                      report (stderr) of what maps, what changes, what does not;
                                      applies nothing (docs/migrate.md)
  kubectl metalgate help [COMMAND]    this help, or COMMAND's (also: COMMAND -h)
  kubectl metalgate version           the plugin's version
  kubectl metalgate completion SHELL  a bash or zsh completion script

Flags (before or after the command):
  -n, --namespace NS         the namespace of the objects asked about: allocations and
                             announcers show only NS's Services (default: every namespace);
                             backends looks TARGET up in NS (default: the context's)
  -A, --all-namespaces       allocations and announcers: every namespace (the default)
  -o, --output FORMAT        pools, allocations, announcers: json, yaml or wide
  --metalgate-namespace NS   metalgate's namespace, where pools and speakers live and where
                             migrate puts MetalLB's objects (default metalgate-system)
  --debug-reader SA          the ServiceAccount in metalgate's namespace whose short-lived token
                             (TokenRequest) reads the speakers for allocations and announcers
                             (default metalgate-debug-reader); without one, the kubeconfig's own
                             bearer token is sent
  kubectl's flags:           --kubeconfig, --context, --cluster, --user, --as, --as-group,
                             --as-uid, --token, --server (-s), --insecure-skip-tls-verify,
                             --certificate-authority, --client-certificate, --client-key,
                             --tls-server-name, --request-timeout, --disable-compression

migrate flags:
  -f, --filename FILE|DIR|-   read manifests (YAML or JSON, Lists too) instead of the cluster;
                              repeatable; a DIR's *.yaml, *.yml and *.json
  --report FILE               write the report to FILE instead of stderr
  --strict                    exit 3 when the report has a BREAKING item (a protection
                              ingress-nginx gave that metalgate would not)
  --metallb-namespace NS      MetalLB's namespace (default metallb-system)
  --nginx-class NAMES         IngressClass names ingress-nginx serves (default nginx; also every
                              IngressClass read with controller k8s.io/ingress-nginx)
  --ingress-class NAME        the class migrated Ingresses get (default metalgate)
  --rewrite-annotations       nginx.ingress.kubernetes.io annotations to metalgate.io (default
                              true; false keeps them: the proxy reads them with
                              --nginx-annotations)
  --drop-unsupported          leave out nginx annotations metalgate does not support or refuses
                              (snippets); default: kept, the proxy reports each in a Warning event
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the plugin's global flags.
type options struct {
	// kube are the standard kubectl flags (--kubeconfig, --context, --as, --token, --server,
	// -n, ...), read by k8s.io/cli-runtime as kubectl reads them.
	kube *genericclioptions.ConfigFlags
	// namespace is -n/--namespace: the namespace of the objects asked about (Services,
	// Ingresses, routes); namespaceSet says it was given.
	namespace    string
	namespaceSet bool
	// allNamespaces is -A/--all-namespaces.
	allNamespaces bool
	// metalgateNamespace is --metalgate-namespace: where pools and speakers live and where
	// migrate puts MetalLB's objects. Default metalgate-system.
	metalgateNamespace string
	// output is -o/--output: table (""), wide, json or yaml, for the listing commands.
	output outputFormat
	// debugReader is the ServiceAccount whose token reads the speakers (--debug-reader).
	debugReader string
	migrate     migrateOptions
}

// kubeconfigOptions are the options of a command line naming only a kubeconfig.
func kubeconfigOptions(path string) options {
	kube := genericclioptions.NewConfigFlags(true)
	*kube.KubeConfig = path
	return options{kube: kube, metalgateNamespace: defaultMetalgateNamespace, debugReader: debugReaderName}
}

// objectNamespace is the namespace a listing reads the user's objects from: -n's, or ""
// (every namespace) without -n or with -A.
func (o options) objectNamespace() string {
	if o.allNamespaces || !o.namespaceSet {
		return ""
	}
	return o.namespace
}

// defaultMetalgateNamespace is where metalgate runs unless --metalgate-namespace says otherwise.
const defaultMetalgateNamespace = "metalgate-system"

// namespaceUse says what a command does with -n/--namespace and -A/--all-namespaces.
type namespaceUse int

const (
	// namespaceNone: the command reads no namespaced objects of the user's; -n and -A are
	// refused (before -n meant metalgate's namespace, so an old command line fails loudly
	// rather than meaning something else).
	namespaceNone namespaceUse = iota
	// namespaceFilter: the command lists objects of every namespace unless -n narrows it
	// to one; -A says every namespace explicitly.
	namespaceFilter
	// namespaceOne: the command names one object, in -n's namespace (default: the
	// kubeconfig context's); -A is refused.
	namespaceOne
)

// env is what a command works with: the cluster, the pods' ports, flags and arguments.
type env struct {
	c    client.Reader
	pods podProxy
	// speakerTokens gives the token the speakers are read with; nil: none is sent.
	speakerTokens *speakerTokens
	// done releases what the command held open (port-forwards); nil: nothing.
	done func()
	o    options
	args []string
	// contextNamespace is the kubeconfig context's namespace ("default" when it sets none).
	contextNamespace string
	now              func() time.Time
	// stdin and stderr: migrate reads -f - and writes its report there.
	stdin  io.Reader
	stderr io.Writer
}

// command is one subcommand; nargs is how many arguments it takes.
type command struct {
	run   func(context.Context, *env, io.Writer) error
	nargs int
	// offline says the command needs no cluster with these options (migrate -f).
	offline func(options) bool
	// namespaces is what the command does with -n and -A.
	namespaces namespaceUse
	// listing says the command prints rows, and so takes -o.
	listing bool
	// help is what help COMMAND and COMMAND -h print.
	help string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, newEnv)
}

// runWith is run with the connection made by connect (tests swap the pods' ports).
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, connect func(options) (*env, error)) int {
	return runStdin(ctx, args, os.Stdin, stdout, stderr, connect)
}

// runStdin is runWith reading standard input (migrate -f -) from stdin.
func runStdin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, connect func(options) (*env, error)) int {
	o, cmd, cmdArgs, code := parseCommandLine(args, commands(), stdout, stderr)
	if code >= 0 {
		return code
	}
	c := commands()[cmd]
	e := &env{o: o, now: time.Now}
	if c.offline == nil || !c.offline(o) {
		var err error
		if e, err = connect(o); err != nil {
			fmt.Fprintf(stderr, "kubectl metalgate: %v\n", err)
			return 1
		}
	}
	e.args, e.stdin, e.stderr = cmdArgs, stdin, stderr
	if e.done != nil {
		defer e.done()
	}
	if err := c.run(ctx, e, stdout); err != nil {
		fmt.Fprintf(stderr, "kubectl metalgate %s: %v\n", cmd, err)
		if ee := (*exitError)(nil); errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// commands are the plugin's subcommands that read or translate objects (help, version and
// completion are answered by parseCommandLine).
func commands() map[string]command {
	return map[string]command{
		"pools":       {run: pools, listing: true, help: poolsHelp},
		"allocations": {run: allocations, namespaces: namespaceFilter, listing: true, help: allocationsHelp},
		"announcers":  {run: announcers, namespaces: namespaceFilter, listing: true, help: announcersHelp},
		"backends":    {run: backends, nargs: 1, namespaces: namespaceOne, listing: true, help: backendsHelp},
		"check":       {run: check, help: checkHelp},
		"migrate":     {run: migrate, offline: func(o options) bool { return len(o.migrate.files) > 0 }, help: migrateHelp},
	}
}

// newFlagSet is the plugin's flag set, writing into o; output receives -o's value and help
// says -h/--help was given.
func newFlagSet(o *options) (fs *pflag.FlagSet, output *string, help *bool) {
	fs = pflag.NewFlagSet("kubectl metalgate", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are said once, by parseCommandLine
	fs.Usage = func() {}
	fs.SortFlags = false
	o.kube = genericclioptions.NewConfigFlags(true)
	o.kube.AddFlags(fs)
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the objects of every namespace")
	fs.StringVar(&o.metalgateNamespace, "metalgate-namespace", defaultMetalgateNamespace, "metalgate's namespace, where pools and speakers live")
	output = fs.StringP("output", "o", "", "output format: "+outputFormats)
	fs.StringVar(&o.debugReader, "debug-reader", debugReaderName, "ServiceAccount whose token reads the speakers")
	registerMigrateFlags(fs, &o.migrate)
	help = fs.BoolP("help", "h", false, "help for the plugin or the command")
	return fs, output, help
}

// parseCommandLine reads the flags, the command (one of commands) and its arguments from
// args, flags before and after the command name and its arguments, as kubectl accepts them.
// It answers help (help [COMMAND], COMMAND -h), version and completion itself, on stdout.
// code is the exit code when there is nothing more to run (those: 0; a usage error, said on
// stderr: 2), else -1.
func parseCommandLine(args []string, commands map[string]command, stdout, stderr io.Writer) (o options, cmd string, cmdArgs []string, code int) {
	fs, output, help := newFlagSet(&o)
	if len(args) > 0 && args[0] == "__complete" { // kubectl_complete-metalgate and the shell scripts
		for _, c := range complete(commands, fs, args[1:]) {
			fmt.Fprintln(stdout, c)
		}
		return o, "", nil, 0
	}
	usageError := func(format string, a ...any) (options, string, []string, int) {
		fmt.Fprintf(stderr, "kubectl metalgate: "+format+"\n", a...)
		fmt.Fprintln(stderr, "See 'kubectl metalgate help'.")
		return o, "", nil, 2
	}
	if err := fs.Parse(args); err != nil {
		return usageError("%v", err)
	}
	pos := fs.Args()
	if len(pos) > 0 {
		cmd, cmdArgs = pos[0], pos[1:]
	}
	switch {
	case cmd == "help" || *help:
		topic := cmd
		if cmd == "help" {
			if len(cmdArgs) > 1 {
				return usageError("help: unexpected argument %q", cmdArgs[1])
			}
			topic = ""
			if len(cmdArgs) == 1 {
				topic = cmdArgs[0]
			}
		}
		text, ok := helpText(commands, topic)
		if !ok {
			return usageError("help: unknown command %q", topic)
		}
		fmt.Fprint(stdout, text)
		return o, "", nil, 0
	case cmd == "version":
		if len(cmdArgs) > 0 {
			return usageError("version: unexpected argument %q", cmdArgs[0])
		}
		info, ok := debug.ReadBuildInfo()
		fmt.Fprint(stdout, versionString(version, info, ok))
		return o, "", nil, 0
	case cmd == "completion":
		if len(cmdArgs) != 1 {
			return usageError("completion: want one argument, bash or zsh; got %d", len(cmdArgs))
		}
		if err := writeCompletion(stdout, cmdArgs[0]); err != nil {
			return usageError("%v", err)
		}
		return o, "", nil, 0
	}
	o.namespace, o.namespaceSet = *o.kube.Namespace, fs.Changed("namespace")
	if err := checkKubeFlags(o); err != nil {
		return usageError("%v", err)
	}
	var err error
	if o.output, err = parseOutput(*output); err != nil {
		return usageError("%v", err)
	}
	var misplaced string
	fs.Visit(func(f *pflag.Flag) {
		if cmd != "migrate" && slices.Contains(migrateFlagNames, f.Name) {
			misplaced = flagName(f)
		}
	})
	if misplaced != "" {
		return usageError("flag %s is only for migrate", misplaced)
	}
	c, ok := commands[cmd]
	if !ok {
		if cmd != "" {
			fmt.Fprintf(stderr, "kubectl metalgate: unknown command %q\n\n", cmd)
		}
		fmt.Fprint(stderr, usage)
		return o, "", nil, 2
	}
	if len(cmdArgs) > c.nargs {
		return usageError("unexpected argument %q", cmdArgs[c.nargs])
	}
	if len(cmdArgs) != c.nargs {
		fmt.Fprintf(stderr, "kubectl metalgate %s: want %d argument(s), got %d\n\n", cmd, c.nargs, len(cmdArgs))
		fmt.Fprint(stderr, usage)
		return o, "", nil, 2
	}
	if err := checkNamespaceFlags(cmd, c.namespaces, o); err != nil {
		return usageError("%v", err)
	}
	if fs.Changed("output") && !c.listing {
		return usageError("flag -o/--output: %s prints no listing; -o is for pools, allocations, announcers and backends", cmd)
	}
	return o, cmd, cmdArgs, -1
}

// flagName is how errors name f: "-f/--filename", "--report".
func flagName(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + "/--" + f.Name
	}
	return "--" + f.Name
}

// checkKubeFlags refuses values of the kube flags that would otherwise fail only when the
// cluster is asked, without naming the flag.
func checkKubeFlags(o options) error {
	if t := *o.kube.Timeout; t != "" && t != "0" {
		if _, err := strconv.ParseUint(t, 10, 64); err != nil {
			d, err := time.ParseDuration(t)
			if err != nil || d < 0 {
				return fmt.Errorf("flag --request-timeout: %q is not a duration (a whole number of seconds, or with a unit: 30s, 2m)", t)
			}
		}
	}
	if o.namespaceSet && o.namespace == "" {
		return errors.New("flag -n/--namespace: empty namespace")
	}
	if o.metalgateNamespace == "" {
		return errors.New("flag --metalgate-namespace: empty namespace")
	}
	return nil
}

// checkNamespaceFlags refuses -n and -A where cmd has no use for them (use).
func checkNamespaceFlags(cmd string, use namespaceUse, o options) error {
	switch use {
	case namespaceNone:
		if o.namespaceSet {
			return fmt.Errorf("flag -n/--namespace: %s reads no objects of one namespace; metalgate's own namespace is --metalgate-namespace", cmd)
		}
		if o.allNamespaces {
			return fmt.Errorf("flag -A/--all-namespaces: %s reads no objects of one namespace", cmd)
		}
	case namespaceOne:
		if o.allNamespaces {
			return fmt.Errorf("flag -A/--all-namespaces: %s names one object; give its namespace with -n", cmd)
		}
	}
	return nil
}

// newEnv connects to the cluster of the kubeconfig.
func newEnv(o options) (*env, error) {
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	ns, _, err := o.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register Kubernetes types: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register metalgate types: %w", err)
	}
	if err := gwv1.Install(scheme); err != nil {
		return nil, fmt.Errorf("register Gateway API types: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	pf, err := newPortForwards(cfg, cs.CoreV1().RESTClient())
	if err != nil {
		return nil, err
	}
	return &env{c: c, pods: pf, speakerTokens: newSpeakerTokens(cfg, cs, o.debugReader), done: pf.Close, o: o, contextNamespace: ns, now: time.Now}, nil
}
