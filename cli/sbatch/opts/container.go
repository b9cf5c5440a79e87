package opts

import "github.com/tide-hpc/tide/ctld/api"

// setContainerImage is --container-image: the reference is normalised
// here as Docker does, so that a typo fails at submit rather than on the
// node.
func setContainerImage(st *state, v string, _ bool) error {
	img, err := api.NormalizeImage(v)
	if err != nil {
		return errorf("Invalid --container-image argument: %s: %v", v, err)
	}
	st.spec.ContainerImage = img
	return nil
}

// setContainerMounts is --container-mounts=SRC:DST[:ro],…; a later
// occurrence replaces an earlier one, as with every other option.
func setContainerMounts(st *state, v string, _ bool) error {
	ms, err := api.ParseContainerMounts(v)
	if err != nil {
		return errorf("Invalid --container-mounts argument: %v", err)
	}
	st.spec.ContainerMounts = ms
	return nil
}
