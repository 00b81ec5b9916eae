package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/metalgate/metalgate/e2e/lab"
)

// gatewayNS is the tenant served through Gateway API (config/demo/gateway).
const gatewayNS = "shop"

// gatewayTenant applies the GatewayClass and tenant shop's Gateway and HTTPRoute, waits until
// the Gateway is Programmed with its own VIP from the demo pool (the controller made its
// Service and its proxy), and curls that VIP from the client.
func (d *demo) gatewayTenant(ctx context.Context) error {
	for _, dir := range []string{"config/demo/gatewayclass", "config/demo/gateway"} {
		if err := d.apply(ctx, dir); err != nil {
			return err
		}
	}
	if err := d.waitFor(ctx, "Deployment shop/echo ready", 4*time.Minute, func() error {
		return d.deploymentReady(ctx, gatewayNS, "echo")
	}); err != nil {
		return err
	}
	var vip netip.Addr
	var proxy string
	if err := d.waitFor(ctx, "Gateway shop/web Programmed with an address", 4*time.Minute, func() error {
		out, err := d.kubectl(ctx, "get", "gateway", "-n", gatewayNS, "web", "-o",
			`jsonpath={.status.conditions[?(@.type=="Programmed")].status}|{.status.conditions[?(@.type=="Programmed")].message}|{.status.addresses[0].value}`)
		if err != nil {
			return err
		}
		parts := strings.SplitN(strings.TrimSpace(out), "|", 3)
		if len(parts) != 3 || parts[0] != "True" {
			return fmt.Errorf("not programmed: %s", out)
		}
		if vip, err = netip.ParseAddr(parts[2]); err != nil || !lab.VIPPool.Contains(vip) {
			return fmt.Errorf("address %q is not from %s", parts[2], lab.VIPPool)
		}
		proxy = parts[1]
		return nil
	}); err != nil {
		return err
	}
	d.ok("Gateway shop/web Programmed: %s; its own VIP %s", proxy, vip)
	out, err := d.kubectl(ctx, "get", "gateway,httproute", "-n", gatewayNS)
	if err != nil {
		return err
	}
	d.indent(out)
	if err := d.curlEcho(ctx, vip, gatewayNS); err != nil {
		return err
	}
	for ns, other := range d.vips {
		if other == vip {
			return fmt.Errorf("the Gateway's VIP %s is also tenant %s's", vip, ns)
		}
	}
	d.ok("one Gateway, one VIP of its own, routed by its HTTPRoute: no Ingress, no node address")
	return nil
}
