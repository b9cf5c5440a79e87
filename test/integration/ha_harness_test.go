package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/pki"
)

// Standby controllers in the harness's cluster (clusterOpts.controllers):
// the first controller is the harness's own (c.ctld, tide.yaml); the
// others share its PostgreSQL store, each with a state directory, socket
// and node_addr of its own (tidectld-N.yaml). Nodes list every
// controller's node_addr and the commands every socket (TIDE_SOCKET), so
// both fail over by themselves.

// standbyCtl is one more controller of a cluster.
type standbyCtl struct {
	name, cfg, socket, nodeAddr string
	cmd                         *exec.Cmd
}

// controllerNames names the cluster's controllers as daemons: ctldName,
// then tidectld-2, tidectld-3…
func (c *cluster) controllerNames() []string {
	names := []string{ctldName}
	for _, sb := range c.standbys {
		names = append(names, sb.name)
	}
	return names
}

// standby returns the standby controller named name, nil for none.
func (c *cluster) standby(name string) *standbyCtl {
	for _, sb := range c.standbys {
		if sb.name == name {
			return sb
		}
	}
	return nil
}

// isController reports whether daemon name is one of the controllers.
func (c *cluster) isController(name string) bool {
	return name == ctldName || c.standby(name) != nil
}

// controllerCmd returns controller name's running command.
func (c *cluster) controllerCmd(name string) *exec.Cmd {
	if name == ctldName {
		return c.ctld
	}
	if sb := c.standby(name); sb != nil {
		return sb.cmd
	}
	return nil
}

// controllerSocket returns controller name's socket.
func (c *cluster) controllerSocket(name string) string {
	if sb := c.standby(name); sb != nil {
		return sb.socket
	}
	return c.socket
}

// writeStandbyConfigs writes tidectld-2… from the first controller's
// configuration cfg (which names the first's state_dir, socket and
// node_addr) and returns the node_addr list every node is given.
func (c *cluster) writeStandbyConfigs(n int, cfg string) string {
	c.t.Helper()
	addrs := []string{fmt.Sprintf("%s:%d", c.ctlHost, c.port)}
	for i := 2; i <= n; i++ {
		sb := &standbyCtl{name: fmt.Sprintf("tidectld-%d", i), socket: filepath.Join(c.dir, fmt.Sprintf("ctld-%d.sock", i)),
			nodeAddr: fmt.Sprintf("%s:%d", c.ctlHost, freePort(c.t))}
		sb.cfg = filepath.Join(c.dir, sb.name+".yaml")
		own := strings.NewReplacer(
			"state_dir: "+c.dir+"/ctld\n", fmt.Sprintf("state_dir: %s/ctld-%d\n", c.dir, i),
			"socket: "+c.socket+"\n", "socket: "+sb.socket+"\n",
			fmt.Sprintf("node_addr: %s:%d\n", c.ctlHost, c.port), "node_addr: "+sb.nodeAddr+"\n",
		).Replace(cfg) + fmt.Sprintf("\nha: {controller_name: ctl%d}\n", i)
		if err := os.WriteFile(sb.cfg, []byte(own), 0o644); err != nil {
			c.t.Fatal(err)
		}
		c.standbys = append(c.standbys, sb)
		addrs = append(addrs, sb.nodeAddr)
	}
	return strings.Join(addrs, ",")
}

// startStandbys gives every standby the first controller's CA and step
// key (as an operator copies them to each controller host), starts them
// and waits until each answers as a standby.
func (c *cluster) startStandbys() {
	c.t.Helper()
	for i, sb := range c.standbys {
		dir := filepath.Join(c.dir, fmt.Sprintf("ctld-%d", i+2))
		files := []string{"step_key.pem"}
		if c.tls {
			files = append(files, "tls/"+pki.CACertFile, "tls/"+pki.CAKeyFile)
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(c.dir, "ctld", f))
			if err == nil {
				err = os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o700)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, f), b, 0o600)
			}
			if err != nil {
				c.t.Fatal(err)
			}
		}
		log, _ := os.OpenFile(filepath.Join(c.dir, sb.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		cmd := c.onHost("ctl", nil, filepath.Join(binDir, "tidectld"), "--config", sb.cfg)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			c.t.Fatal(err)
		}
		sb.cmd = cmd
		c.eventually(15*time.Second, sb.name+" answers as a standby", func() bool {
			p, err := pingSocket(sb.socket)
			return err == nil && p.Role == api.RoleStandby
		})
	}
}

// stopStandbys stops the standbys (resumed first, if paused).
func (c *cluster) stopStandbys() {
	for _, sb := range c.standbys {
		if sb.cmd != nil && sb.cmd.ProcessState == nil {
			_ = sb.cmd.Process.Signal(syscall.SIGCONT)
			kill(sb.cmd, syscall.SIGTERM)
		}
	}
}

// pingSocket pings the controller on socket.
func pingSocket(socket string) (api.PingResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl := client.NewUnix(socket)
	defer cl.Close()
	return cl.Ping(ctx)
}

// primaryName names the controller that answers as primary ("" when
// none does).
func (c *cluster) primaryName() string {
	for _, name := range c.controllerNames() {
		if cmd := c.controllerCmd(name); cmd == nil || cmd.ProcessState != nil {
			continue
		}
		if p, err := pingSocket(c.controllerSocket(name)); err == nil && p.Role == api.RolePrimary {
			return name
		}
	}
	return ""
}

// sockets lists every controller's socket, for TIDE_SOCKET.
func (c *cluster) sockets() string {
	s := []string{c.socket}
	for _, sb := range c.standbys {
		s = append(s, sb.socket)
	}
	return strings.Join(s, ",")
}
