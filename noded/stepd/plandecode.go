package stepd

import (
	"fmt"

	"github.com/tide-hpc/tide/internal/jsonfast"
)

// decodePlan decodes an exec.json as json.Unmarshal does. The supervisor
// reads one per job, and encoding/json's reflection over it (the
// environment is most of it) was a tenth of the supervisor's CPU for
// short jobs; so what tided writes is read by hand, and anything else
// goes to json.Unmarshal from the start (see jsonfast).
func decodePlan(data []byte, p *Plan) error {
	return jsonfast.Decode(data, p, jsonfast.Whole, planFields)
}

func planFields(d *jsonfast.Decoder, p *Plan) bool {
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "job_id":
			return d.Uint64(&p.JobID)
		case "node":
			return d.String(&p.Node)
		case "script":
			return d.String(&p.Script)
		case "args":
			return d.Strings(&p.Args)
		case "env":
			return d.Strings(&p.Env)
		case "work_dir":
			return d.String(&p.WorkDir)
		case "stdin":
			return d.String(&p.Stdin)
		case "stdout":
			return d.String(&p.Stdout)
		case "stderr":
			return d.String(&p.Stderr)
		case "append":
			return d.Bool(&p.Append)
		case "umask":
			return d.Int(&p.Umask)
		case "set_user":
			return d.Bool(&p.SetUser)
		case "uid":
			return d.Uint32(&p.UID)
		case "gid":
			return d.Uint32(&p.GID)
		case "groups":
			return d.Uint32s(&p.Groups)
		case "cgroup":
			return d.Value(&p.Cgroup, false)
		}
		return false
	})
}

// readPlan reads the exec.json at path.
func readPlan(path string, p *Plan) error {
	data, err := ReadFile(path)
	if err != nil {
		return err
	}
	if err := decodePlan(data, p); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}
