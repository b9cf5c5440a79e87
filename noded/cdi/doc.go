// Package cdi reads Container Device Interface specs (the files that
// nvidia-ctk cdi generate writes to /etc/cdi or /var/run/cdi) and
// applies their container edits to an OCI spec, so that a container
// job's GPUs come with the device nodes, driver libraries, variables and
// hooks the node's driver installation says they need.
//
// Only what Tide uses is implemented: cdiVersion 0.3.0 to 0.6.x, JSON
// and YAML files, the spec's and devices' containerEdits with env,
// deviceNodes, mounts and hooks. Other fields are ignored. No CDI Go
// module is available to the project, hence this small reader.
package cdi
