package api

// High availability (issue 26): several tidectld share one PostgreSQL
// store; the one that holds the store's leader lease is the primary and
// the others are standbys. A standby answers every request but a ping
// with 503 (ErrUnavailable, message naming the primary), so clients and
// node daemons that know all controllers' addresses move on to the next.

// PathPing answers on every controller, primary or standby.
const PathPing = "/api/v1/ping"

// Controller roles in PingResponse.
const (
	// RolePrimary holds the leader lease and acts.
	RolePrimary = "primary"
	// RoleStandby waits for the lease; it serves nothing but pings.
	RoleStandby = "standby"
)

// PingResponse is one controller's answer to a ping.
type PingResponse struct {
	// Name is this controller's name (controller_name, by default its
	// host name).
	Name string `json:"name"`
	// Cluster is cluster_name.
	Cluster string `json:"cluster"`
	// Role is RolePrimary or RoleStandby.
	Role string `json:"role"`
	// Primary names the controller that holds the lease as far as this
	// one knows ("" when none does), and PrimaryAddr its node_addr and
	// PrimaryAPIAddr its api_addr ("" when it has none).
	Primary        string `json:"primary,omitempty"`
	PrimaryAddr    string `json:"primary_addr,omitempty"`
	PrimaryAPIAddr string `json:"primary_api_addr,omitempty"`
	// Epoch is the lease's fencing token: it grows with every change of
	// primary (0 on a store without a lease).
	Epoch uint64 `json:"epoch,omitempty"`
}
