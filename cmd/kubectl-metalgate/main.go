// Command kubectl-metalgate is the kubectl plugin of metalgate: `kubectl metalgate pools`,
// `allocations` and `check` read the cluster and explain what metalgate did and why.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

const usage = `kubectl metalgate: what metalgate allocated and why.

Usage:
  kubectl metalgate pools         usage of every IPAddressPool, per family
  kubectl metalgate allocations   Service -> address -> pool
  kubectl metalgate check         configuration problems (overlapping or invalid pools, pending Services)

Flags (before or after the command):
  --kubeconfig PATH   kubeconfig (default: $KUBECONFIG, else ~/.kube/config)
  --context NAME      kubeconfig context
  -n, --namespace NS  metalgate's namespace, where pools live (default metalgate-system)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the plugin's global flags.
type options struct {
	kubeconfig, context, namespace string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kubectl metalgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig")
	fs.StringVar(&o.context, "context", "", "kubeconfig context")
	fs.StringVar(&o.namespace, "namespace", "metalgate-system", "metalgate's namespace")
	fs.StringVar(&o.namespace, "n", "metalgate-system", "metalgate's namespace")
	// Accept flags before and after the command name, as kubectl does.
	var cmd string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		if cmd != "" {
			fmt.Fprintf(stderr, "kubectl metalgate: unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		cmd, rest = fs.Arg(0), fs.Args()[1:]
	}
	commands := map[string]func(context.Context, client.Reader, options, io.Writer) error{
		"pools":       pools,
		"allocations": allocations,
		"check":       check,
	}
	f, ok := commands[cmd]
	if !ok {
		if cmd != "" {
			fmt.Fprintf(stderr, "kubectl metalgate: unknown command %q\n\n", cmd)
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	c, err := newClient(o)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl metalgate: %v\n", err)
		return 1
	}
	if err := f(ctx, c, o, stdout); err != nil {
		fmt.Fprintf(stderr, "kubectl metalgate %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func newClient(o options) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}
