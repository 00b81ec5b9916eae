// Command kubectl-metalgate is the kubectl plugin of metalgate: `kubectl metalgate pools`,
// `allocations`, `announcers`, `backends` and `check` read the cluster (and, through the API
// server's pods/portforward, the speakers and ingress proxies) and explain what metalgate did
// and why; `migrate` translates MetalLB objects and ingress-nginx Ingresses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
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

Flags (before or after the command):
  --kubeconfig PATH   kubeconfig (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME      kubeconfig context
  -n, --namespace NS  metalgate's namespace, where pools and speakers live (default
                      metalgate-system); for backends, TARGET's namespace (default:
                      the kubeconfig context's); for migrate, where MetalLB's objects go
  --debug-reader SA   the ServiceAccount in metalgate's namespace whose short-lived token
                      (TokenRequest) reads the speakers for allocations and announcers
                      (default metalgate-debug-reader); without one, the kubeconfig's own
                      bearer token is sent

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
	kubeconfig, context, namespace string
	// debugReader is the ServiceAccount whose token reads the speakers (--debug-reader).
	debugReader string
	// namespaceSet says -n was given (backends then takes it as the Ingress's namespace).
	namespaceSet bool
	migrate      migrateOptions
}

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
	commands := map[string]command{
		"pools":       {run: pools},
		"allocations": {run: allocations},
		"announcers":  {run: announcers},
		"backends":    {run: backends, nargs: 1},
		"check":       {run: check},
		"migrate":     {run: migrate, offline: func(o options) bool { return len(o.migrate.files) > 0 }},
	}
	o, cmd, cmdArgs, code := parseCommandLine(args, commands, stderr)
	if code >= 0 {
		return code
	}
	c := commands[cmd]
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

// parseCommandLine reads the flags, the command (one of commands) and its arguments from
// args, flags before and after the command name and its arguments, as kubectl accepts them.
// code is the exit code when there is nothing to run (help: 0, a usage error, said on stderr:
// 2), else -1.
func parseCommandLine(args []string, commands map[string]command, stderr io.Writer) (o options, cmd string, cmdArgs []string, code int) {
	fs := flag.NewFlagSet("kubectl metalgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig")
	fs.StringVar(&o.context, "context", "", "kubeconfig context")
	fs.StringVar(&o.namespace, "namespace", "metalgate-system", "metalgate's namespace")
	fs.StringVar(&o.namespace, "n", "metalgate-system", "metalgate's namespace")
	fs.StringVar(&o.debugReader, "debug-reader", debugReaderName, "ServiceAccount whose token reads the speakers")
	registerMigrateFlags(fs, &o.migrate)
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return o, "", nil, 0
			}
			return o, "", nil, 2
		}
		if fs.NArg() == 0 {
			break
		}
		switch {
		case cmd == "":
			cmd = fs.Arg(0)
		case len(cmdArgs) < commands[cmd].nargs:
			cmdArgs = append(cmdArgs, fs.Arg(0))
		default:
			fmt.Fprintf(stderr, "kubectl metalgate: unexpected argument %q\n", fs.Arg(0))
			return o, "", nil, 2
		}
		rest = fs.Args()[1:]
	}
	var misplaced string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "n" || f.Name == "namespace" {
			o.namespaceSet = true
		}
		if cmd != "migrate" && slices.Contains(migrateFlagNames, f.Name) {
			misplaced = f.Name
		}
	})
	if misplaced != "" {
		fmt.Fprintf(stderr, "kubectl metalgate: flag -%s is only for migrate\n", misplaced)
		return o, "", nil, 2
	}
	c, ok := commands[cmd]
	if !ok {
		if cmd != "" {
			fmt.Fprintf(stderr, "kubectl metalgate: unknown command %q\n\n", cmd)
		}
		fmt.Fprint(stderr, usage)
		return o, "", nil, 2
	}
	if len(cmdArgs) != c.nargs {
		fmt.Fprintf(stderr, "kubectl metalgate %s: want %d argument(s), got %d\n\n", cmd, c.nargs, len(cmdArgs))
		fmt.Fprint(stderr, usage)
		return o, "", nil, 2
	}
	return o, cmd, cmdArgs, -1
}

// newEnv connects to the cluster of the kubeconfig.
func newEnv(o options) (*env, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
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
