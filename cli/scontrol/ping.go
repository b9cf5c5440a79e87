package scontrol

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Standby controllers (issue 26): with several controllers configured
// (TIDE_CONTROLLER="ctl1:6820,ctl2:6820") ping asks each, as Slurm's
// scontrol pings every SlurmctldHost, and prints one line each in the
// configured order. Slurm names a controller's mode by its place in
// the list; Tide names it by what the controller answers (the one that
// holds the lease is the primary), which is what an operator asks
// ping for after a failover.

// multiPinger is an API that knows several controllers
// (*client.Client): ping asks each of them.
type multiPinger interface {
	Endpoints() []string
	PingAll(ctx context.Context) []client.PingResult
}

var _ multiPinger = (*client.Client)(nil)

// getuid is the caller's uid, for Slurm's banner to root; tests
// replace it.
var getuid = os.Getuid

// severalControllers returns c as a multiPinger when it has more than
// one controller.
func severalControllers(c cmdutil.API) (multiPinger, bool) {
	p, ok := c.(multiPinger)
	if !ok || len(p.Endpoints()) < 2 {
		return nil, false
	}
	return p, true
}

// controllerPing is one line of ping: a controller and how it answered.
type controllerPing struct {
	host string
	up   bool
	mode string
	res  client.PingResult
}

// pingControllers pings every controller and names each one's mode:
// "primary" for one that answers as the primary, or that answers
// nothing while one that does answer names it as the primary (its lease
// has not lapsed yet); "backup" for the others.
func pingControllers(ctx context.Context, p multiPinger) []controllerPing {
	res := p.PingAll(ctx)
	named := map[string]bool{} // primaries as the controllers that answered know them
	for _, r := range res {
		if r.Err == nil {
			for _, s := range []string{r.Resp.Primary, r.Resp.PrimaryAddr, r.Resp.PrimaryAPIAddr} {
				if s != "" {
					named[s] = true
				}
			}
		}
	}
	out := make([]controllerPing, len(res))
	for i, r := range res {
		host := r.Addr
		if h, _, err := net.SplitHostPort(r.Addr); err == nil {
			host = h
		}
		cp := controllerPing{host: host, up: r.Err == nil, mode: "backup", res: r}
		if cp.up && r.Resp.Role == api.RolePrimary || !cp.up && (named[r.Addr] || named[host]) {
			cp.mode = "primary"
		}
		out[i] = cp
	}
	return out
}

// downError is the error of a ping no controller answered: every
// controller's address and reason.
func downError(pings []controllerPing) error {
	fe := &client.FailoverError{}
	for _, p := range pings {
		fe.Addrs = append(fe.Addrs, p.res.Addr)
		fe.Errs = append(fe.Errs, p.res.Err)
	}
	return fmt.Errorf("ping controllers: %w", fe)
}

// pingAll prints Slurm's ping lines for every controller. As Slurm's,
// it fails when none is up, and tells root to restore any that is
// down.
func (o *Options) pingAll(ctx context.Context, p multiPinger) error {
	pings := pingControllers(ctx, p)
	fmt.Fprint(o.IO.Out, pingLines(pings))
	up, down := 0, 0
	for _, cp := range pings {
		if cp.up {
			up++
		} else {
			down++
		}
	}
	if down > 0 && getuid() == 0 {
		fmt.Fprint(o.IO.Out, "*****************************************\n"+
			"** RESTORE SLURMCTLD DAEMON TO SERVICE **\n"+
			"*****************************************\n")
	}
	if up == 0 {
		return downError(pings)
	}
	return nil
}

// pingLines writes "Slurmctld(MODE) at HOST is UP|DOWN", one line per
// controller.
func pingLines(pings []controllerPing) string {
	var b strings.Builder
	for _, cp := range pings {
		state := "DOWN"
		if cp.up {
			state = "UP"
		}
		fmt.Fprintf(&b, "Slurmctld(%s) at %s is %s\n", cp.mode, termsafe.Escape(cp.host), state)
	}
	return b.String()
}

// pingAllJSON is ping --json with several controllers: every one in
// the pings list, with its mode.
func (o *Options) pingAllJSON(ctx context.Context, p multiPinger) error {
	pings := pingControllers(ctx, p)
	list := make([]jsonPing, len(pings))
	cluster := ""
	up := 0
	for i, cp := range pings {
		list[i] = jsonPing{Hostname: cp.host, Pinged: "DOWN", Latency: cp.res.Latency.Microseconds(), Mode: cp.mode}
		if cp.up {
			list[i].Pinged = "UP"
			up++
			if cluster == "" {
				cluster = cp.res.Resp.Cluster
			}
		}
	}
	e := o.envelope(cluster)
	e.Pings = &list
	fail := ""
	if up == 0 {
		fail = downError(pings).Error()
	}
	return o.writeEnvelope(e, fail)
}
