package ui

import (
	"errors"
	"html"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// The cluster map: nodes grouped by their leaf switch, each GPU a cell
// whose class says what holds it (free, a whole job, slices, nothing
// on a drained node, unhealthy, node down) and how busy it measured.

// Cell kinds (CSS classes): one letter each, since a map of 1,000
// nodes has 8,000 cells.
const (
	cellFree      = "f" // free, on a node that takes work
	cellWhole     = "w" // held whole by one job
	cellSlices    = "s" // shared by slices
	cellDrained   = "d" // free, on a drained node
	cellUnhealthy = "x" // reported unhealthy
	cellOffline   = "o" // its node is down, not responding or unknown
)

// mapView is the cluster map page's data.
type mapView struct {
	// Denied says why the caller may not see nodes.
	Denied string
	Totals []stat
	Groups []switchGroup
	// Jobs counts the running jobs the caller sees on the map.
	Jobs int
}

// stat is one figure of a summary line.
type stat struct {
	Label, Value, Title, Class string
}

// switchGroup is the nodes under one leaf switch.
type switchGroup struct {
	Name    string
	Path    string
	Summary string
	Nodes   []nodeBox
	// gpus and free count the group's GPUs for Summary.
	gpus, free int
}

// nodeBox is one node on the map.
type nodeBox struct {
	Name, State, Class, Title string
	Cells                     template.HTML
}

// jobRef is a running job as a GPU cell names it.
type jobRef struct {
	id    uint64
	label string
	user  string
	mine  bool
	// memMB and pct are the job's slice on the GPU (0 for whole).
	memMB int64
	pct   int
}

// holders maps node → GPU index → the jobs on it, from the running
// jobs the caller sees.
type holders map[string]map[int][]jobRef

func holdersOf(jobs []RunningJob, me string) holders {
	out := holders{}
	for i := range jobs {
		j := &jobs[i]
		ref := jobRef{id: j.ID, label: j.Label, user: j.User, mine: j.User == me}
		for _, a := range j.Alloc {
			if len(a.GPUs) == 0 {
				continue
			}
			m := out[a.Node]
			if m == nil {
				m = map[int][]jobRef{}
				out[a.Node] = m
			}
			r := ref
			r.memMB, r.pct = a.GPUMemMB, a.GPUComputePct
			for _, g := range a.GPUs {
				m[g] = append(m[g], r)
			}
		}
	}
	return out
}

func (h *Handler) serveMap(w http.ResponseWriter, r *http.Request) {
	h.page(w, r, "map", "Cluster", func(rq *request) (string, any, error) {
		return "Cluster", h.buildMap(rq), nil
	})
}

func (h *Handler) buildMap(rq *request) mapView {
	nl, err := h.src.Nodes(rq.r)
	if err != nil {
		if errors.Is(err, api.ErrPermissionDenied) {
			return mapView{Denied: err.Error()}
		}
		return mapView{Denied: "the node list is not available: " + err.Error()}
	}
	return mapOf(nl, h.src.Running(rq.r), rq.who, rq.cl)
}

// mapOf builds the map from the node list and the caller's running
// jobs. Its cost is linear in nodes, GPUs and jobs.
func mapOf(nl api.NodeList, jobs []RunningJob, who Identity, cl Cluster) mapView {
	hold := holdersOf(jobs, who.User)
	v := mapView{Jobs: len(jobs)}
	var t totals
	groupIdx := map[string]int{}
	var b strings.Builder
	for i := range nl.Nodes {
		n := &nl.Nodes[i]
		sw := n.Switch
		k, ok := groupIdx[sw]
		if !ok {
			k = len(v.Groups)
			groupIdx[sw] = k
			g := switchGroup{Name: sw}
			if sw == "" {
				g.Name = "no switch"
			} else if anc := cl.Tree.Ancestors(n.Name); len(anc) > 1 {
				path := slices.Clone(anc)
				slices.Reverse(path)
				g.Path = strings.Join(path, " › ")
			}
			v.Groups = append(v.Groups, g)
		}
		box := nodeBoxOf(n, hold[n.Name], &t, &b)
		g := &v.Groups[k]
		g.Nodes = append(g.Nodes, box)
		_, _, free := n.GPUCounts()
		g.gpus, g.free = g.gpus+len(n.GPUs), g.free+free
	}
	for i := range v.Groups {
		g := &v.Groups[i]
		g.Summary = strconv.Itoa(len(g.Nodes)) + " nodes · " + strconv.Itoa(g.gpus) + " GPUs · " + strconv.Itoa(g.free) + " free"
	}
	v.Totals = t.stats(len(nl.Nodes))
	return v
}

// totals counts the map's cells and nodes.
type totals struct {
	cells                map[string]int
	nodes                map[string]int
	utilSum, utilN, mine int
}

func (t *totals) stats(nodes int) []stat {
	c := t.cells
	all := 0
	for _, n := range c {
		all += n
	}
	out := []stat{
		{Label: "nodes", Value: strconv.Itoa(nodes), Title: nodeStates(t.nodes)},
		{Label: "GPUs", Value: strconv.Itoa(all)},
		{Label: "free", Value: strconv.Itoa(c[cellFree]), Class: "c-f"},
		{Label: "whole jobs", Value: strconv.Itoa(c[cellWhole]), Class: "c-w"},
		{Label: "slices", Value: strconv.Itoa(c[cellSlices]), Class: "c-s", Title: "GPUs shared by GPU slices"},
		{Label: "drained", Value: strconv.Itoa(c[cellDrained]), Class: "c-d", Title: "free GPUs on drained nodes"},
		{Label: "unhealthy", Value: strconv.Itoa(c[cellUnhealthy]), Class: "c-x"},
		{Label: "down", Value: strconv.Itoa(c[cellOffline]), Class: "c-o", Title: "GPUs of nodes that are down, not responding or not registered"},
	}
	if t.utilN > 0 {
		out = append(out, stat{Label: "busy (measured)", Value: strconv.Itoa((t.utilSum+t.utilN/2)/t.utilN) + " %",
			Title: "mean utilisation the nodes measured over " + strconv.Itoa(t.utilN) + " GPUs"})
	}
	if t.mine > 0 {
		out = append(out, stat{Label: "yours", Value: strconv.Itoa(t.mine), Class: "c-me", Title: "GPUs your jobs hold"})
	}
	return out
}

// nodeStates is "12 idle, 3 mix" for a tooltip.
func nodeStates(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Itoa(m[k]) + " " + k
	}
	return strings.Join(parts, ", ")
}

// nodeBoxOf renders one node and its GPU cells, counting them into t.
// The cells are written as HTML here, escaped by hand: 8,000 of them
// through html/template would cost most of the page's time.
func nodeBoxOf(n *api.Node, held map[int][]jobRef, t *totals, b *strings.Builder) nodeBox {
	if t.cells == nil {
		t.cells, t.nodes = map[string]int{}, map[string]int{}
	}
	state := n.SinfoState()
	t.nodes[state]++
	offline := n.State == api.NodeDown || n.State == api.NodeUnknown || !n.Responding
	box := nodeBox{Name: n.Name, State: state, Class: "n-" + strings.TrimSuffix(state, "*")}
	if n.Drain {
		box.Class += " drain"
	}
	if offline {
		box.Class += " off"
	}
	title := n.Name + ": " + n.LongState() + " · CPUs " + strconv.Itoa(n.AllocCPUs) + "/" + strconv.Itoa(n.CPUs) +
		" · memory " + fmtMB(n.AllocMemMB) + "/" + fmtMB(n.MemoryMB)
	if n.GPUModel() != "" {
		title += " · " + strconv.Itoa(len(n.GPUs)) + " × " + n.GPUModel()
	}
	if n.Reason != "" {
		title += " · reason: " + n.Reason
	}
	box.Title = title
	status := map[int]*gres.Status{}
	if !offline {
		for i := range n.GPUStatus {
			status[n.GPUStatus[i].Index] = &n.GPUStatus[i]
		}
	}
	whole := map[int]bool{}
	for _, g := range n.AllocGPUs {
		whole[g] = true
	}
	shared := map[int]api.GPUShare{}
	for _, s := range n.SharedGPUs {
		shared[s.Index] = s
		delete(whole, s.Index)
	}
	b.Reset()
	for i := range n.GPUs {
		d := &n.GPUs[i]
		st := status[d.Index]
		kind, label := cellFree, ""
		var text strings.Builder
		text.WriteString(n.Name + " GPU " + strconv.Itoa(d.Index))
		if d.Model != "" {
			text.WriteString(" (" + d.ModelShort() + ", " + fmtMB(d.MemoryMB) + ")")
		}
		jobs := held[d.Index]
		unhealthy := d.Health == gres.Unhealthy || st != nil && st.Health == gres.Unhealthy
		switch {
		case unhealthy:
			kind, label = cellUnhealthy, "!"
			text.WriteString(": unhealthy")
			if st != nil && st.Reason != "" {
				text.WriteString(" (" + st.Reason + ")")
			}
		case offline:
			kind = cellOffline
			text.WriteString(": node " + strings.ToLower(n.LongState()))
		case shared[d.Index].Slices > 0:
			sh := shared[d.Index]
			kind, label = cellSlices, strconv.Itoa(sh.Slices)
			text.WriteString(": " + strconv.Itoa(sh.Slices) + " slices")
			if d.MemoryMB > 0 {
				text.WriteString(", " + fmtMB(sh.MemMB) + " of " + fmtMB(d.MemoryMB) + " committed (" +
					strconv.Itoa(pct(sh.MemMB, d.MemoryMB)) + " %)")
			}
			if sh.ComputePct > 0 {
				text.WriteString(", " + strconv.Itoa(sh.ComputePct) + " % compute")
			}
		case whole[d.Index]:
			kind = cellWhole
			text.WriteString(": allocated")
		case n.Drain:
			kind = cellDrained
			text.WriteString(": free, node drained")
		default:
			text.WriteString(": free")
		}
		if len(jobs) > 0 && (kind == cellWhole || kind == cellSlices) {
			for k, j := range jobs {
				if k == 0 {
					text.WriteString(" · job ")
				} else {
					text.WriteString(", ")
				}
				text.WriteString(j.label + " (" + j.user)
				if j.memMB > 0 {
					text.WriteString(", " + fmtMB(j.memMB))
				}
				if j.pct > 0 {
					text.WriteString(", " + strconv.Itoa(j.pct) + " %")
				}
				text.WriteString(")")
			}
		} else if kind == cellWhole {
			text.WriteString(" (a job you may not see)")
		}
		cls := "g " + kind
		if kind == cellSlices && d.MemoryMB > 0 {
			cls += " m" + strconv.Itoa(min(pct(shared[d.Index].MemMB, d.MemoryMB)/10, 10))
		}
		if st != nil && !unhealthy {
			cls += " u" + strconv.Itoa(min(max(st.UtilPct, 0), 100)/10)
			text.WriteString(" · busy " + strconv.Itoa(st.UtilPct) + " %")
			if st.MemUsedMB > 0 {
				text.WriteString(" · " + fmtMB(st.MemUsedMB) + " in use")
			}
			t.utilSum += st.UtilPct
			t.utilN++
		}
		mine := false
		for _, j := range jobs {
			mine = mine || j.mine
		}
		if mine {
			cls += " me"
			t.mine++
		}
		t.cells[kind]++
		href := ""
		if len(jobs) > 0 && (kind == cellWhole || kind == cellSlices) {
			href = Prefix + "jobs/" + strconv.FormatUint(jobs[0].id, 10)
		}
		if href != "" {
			b.WriteString(`<a class="` + cls + `" href="` + href + `" title="` + html.EscapeString(text.String()) + `">` + label + `</a>`)
		} else {
			b.WriteString(`<i class="` + cls + `" title="` + html.EscapeString(text.String()) + `">` + label + `</i>`)
		}
	}
	box.Cells = template.HTML(b.String())
	return box
}
