// Command metalgate is the one binary of the metalgate operator. Each component is a
// subcommand: `metalgate controller` assigns LoadBalancer addresses from IPAddressPools (and
// runs the Gateway API controller); `metalgate speaker` announces them from its node, by ARP
// (IPv4) and NDP (IPv6) at layer 2 or by BGP to the routers; `metalgate proxy` routes HTTP(S)
// to pod endpoints for Ingresses or one Gateway and publishes its VIP; `metalgate version`
// prints the build.
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

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/metalgate/metalgate/cmd/metalgate/internal/version"
	"github.com/metalgate/metalgate/internal/memlimit"
)

const usage = `metalgate: LoadBalancer addresses, announcements and ingress for bare-metal Kubernetes.

Usage:
  metalgate controller [flags]   assign addresses from IPAddressPools to LoadBalancer Services
  metalgate proxy [flags]        route HTTP(S) to pod endpoints for Ingresses or a Gateway, publish its VIP
  metalgate speaker [flags]      announce assigned addresses from this node (ARP/NDP or BGP)
  metalgate version              print the version

Run 'metalgate COMMAND -h' for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code: 0 on success, 2 for a
// usage error, 1 when the command failed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "controller":
		err = controllerCommand(ctx, args[1:], stderr)
	case "proxy":
		err = proxyCommand(ctx, args[1:], stderr)
	case "speaker":
		err = speakerCommand(ctx, args[1:], stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, version.String())
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "metalgate: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "metalgate %s: %v\n", args[0], err)
		return 1
	}
}

// errUsage marks an error in the command line; the flag package has already printed why.
var errUsage = errors.New("usage error")

// parseFlags parses the flags of `metalgate NAME`: -h prints them (flag.ErrHelp), a bad flag or
// a stray argument is a usage error (errUsage) after saying why on stderr.
func parseFlags(name string, args []string, stderr io.Writer, bind func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet("metalgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "metalgate %s: unexpected argument %q\n", name, fs.Arg(0))
		return errUsage
	}
	return nil
}

// bindMemoryLimit adds --memory-limit-ratio, which every command has, to fs.
func bindMemoryLimit(fs *flag.FlagSet, ratio *float64) {
	fs.Float64Var(ratio, "memory-limit-ratio", 0.9, "The Go runtime's memory limit as a fraction of the container's memory limit (its cgroup's, the lowest on its path), so that garbage collection works harder before the kernel would kill the process; 0 turns it off; GOMEMLIMIT, when set, wins.")
}

// start sets up logging (withLogger) and the Go memory limit from the container's
// (--memory-limit-ratio), and logs the limit in force. A ratio out of range is an error; a
// cgroup limit that cannot be read is logged, and the process runs without a derived limit.
func start(ctx context.Context, opts *zap.Options, ratio float64, stderr io.Writer) (context.Context, error) {
	if err := memlimit.CheckRatio(ratio); err != nil {
		return nil, fmt.Errorf("--memory-limit-ratio %w", err)
	}
	ctx = withLogger(ctx, opts, stderr)
	logger := logr.FromContextOrDiscard(ctx)
	s, err := memlimit.Apply(memlimit.Host(), ratio, os.Getenv)
	switch {
	case err != nil:
		logger.Error(err, "no memory limit derived from the container's (--memory-limit-ratio)")
	case s.Env:
		logger.Info("memory limit from GOMEMLIMIT", "limitBytes", s.Limit)
	case s.Cgroup > 0:
		logger.Info("memory limit derived from the container's", "limitBytes", s.Limit, "containerBytes", s.Cgroup, "ratio", ratio, "from", s.From)
	}
	return ctx, nil
}

// withLogger sets up logging from the zap flags, writing to stderr, for controller-runtime and
// in the returned context.
func withLogger(ctx context.Context, opts *zap.Options, stderr io.Writer) context.Context {
	opts.DestWriter = stderr
	logger := zap.New(zap.UseFlagOptions(opts))
	ctrl.SetLogger(logger)
	return logr.NewContext(ctx, logger)
}
