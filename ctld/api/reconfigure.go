package api

// PathReconfigure re-reads the controller's configuration file and
// applies it live (scontrol reconfigure; operators only).
const PathReconfigure = "/api/v1/reconfigure"

// ConfigChange is one setting a reconfiguration changed, by its key in
// tide.yaml ("scheduler.policy", "partitions[gpu].max_time",
// "queues[ml].max_running_per_user"). A list entry added or removed as
// a whole has Old or New "(none)".
type ConfigChange struct {
	Key string `json:"key"`
	Old string `json:"old"`
	New string `json:"new"`
}

// ReconfigureResponse answers a reconfiguration that was applied:
// what changed, empty when the file says what the controller already
// runs with.
type ReconfigureResponse struct {
	Changed []ConfigChange `json:"changed"`
}
