package ctld

import (
	"encoding/json"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// The Grafana dashboard and the alerting rules (issue 25) must name only
// metrics the controller exports: a renamed metric would leave a panel
// empty and an alert silent, with nothing failing. The exported names
// come from the controller's own registry, walked collector by
// collector (a vector without children gathers nothing, so gathering
// alone would miss them).

// exportedMetrics is every metric name a controller's registry exports,
// with the histograms' _bucket, _sum and _count series.
func exportedMetrics(t *testing.T, s *Server) map[string]bool {
	t.Helper()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for _, c := range s.metrics.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		_, hist := c.(prometheus.Histogram)
		if _, vec := c.(*prometheus.HistogramVec); vec {
			hist = true
		}
		for d := range ch {
			m := fq.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			out[m[1]] = true
			if hist {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					out[m[1]+suffix] = true
				}
			}
		}
	}
	return out
}

// promqlKeywords take a label list in parentheses after them.
var promqlLabelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// promqlWords are operators and literals spelled as words.
var promqlWords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true, "Inf": true, "NaN": true}

// promqlMetricNames lists the metric names a PromQL expression reads:
// the identifiers that are neither functions (followed by "("),
// keywords, label names (inside {…} and the label lists of by, on…),
// durations (inside […]), strings nor Grafana variables ($x, ${x}). It
// reports unbalanced brackets as an error.
func promqlMetricNames(expr string) ([]string, error) {
	var names []string
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	// skipTo returns the index after the bracket closing the one at i.
	skipTo := func(i int, open, close byte) (int, error) {
		depth := 0
		for ; i < len(expr); i++ {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				k := i + 1
				for k < len(expr) && expr[k] != c {
					if expr[k] == '\\' && c != '`' {
						k++
					}
					k++
				}
				i = k
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, &unbalancedError{expr, open}
	}
	var parens []int
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			k := i + 1
			for k < len(expr) && expr[k] != c {
				if expr[k] == '\\' && c != '`' {
					k++
				}
				k++
			}
			if k >= len(expr) {
				return nil, &unbalancedError{expr, c}
			}
			i = k + 1
		case c == '{' || c == '[':
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			k, err := skipTo(i, c, closer)
			if err != nil {
				return nil, err
			}
			i = k
		case c == '}' || c == ']':
			return nil, &unbalancedError{expr, c}
		case c == '(':
			parens = append(parens, i)
			i++
		case c == ')':
			if len(parens) == 0 {
				return nil, &unbalancedError{expr, c}
			}
			parens = parens[:len(parens)-1]
			i++
		case c == '$':
			// A Grafana variable: $name or ${name}.
			i++
			if i < len(expr) && expr[i] == '{' {
				k, err := skipTo(i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = k
				continue
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number, or a duration such as 5m.
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			k := i
			for k < len(expr) && isIdent(expr[k], false) {
				k++
			}
			word := expr[i:k]
			next := k
			for next < len(expr) && (expr[next] == ' ' || expr[next] == '\n' || expr[next] == '\t') {
				next++
			}
			i = k
			switch {
			case promqlLabelLists[word]:
				if next < len(expr) && expr[next] == '(' {
					end, err := skipTo(next, '(', ')')
					if err != nil {
						return nil, err
					}
					i = end
				}
			case promqlWords[word]:
			case next < len(expr) && expr[next] == '(':
				// A function or an aggregation.
			case followedBy(expr[next:], "by") || followedBy(expr[next:], "without"):
				// An aggregation with its grouping first: sum by (x) (…).
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	if len(parens) > 0 {
		return nil, &unbalancedError{expr, '('}
	}
	return names, nil
}

// followedBy reports whether rest starts with the word w (then a blank
// or a parenthesis).
func followedBy(rest, w string) bool {
	return strings.HasPrefix(rest, w) && len(rest) > len(w) && strings.ContainsRune(" \t\n(", rune(rest[len(w)]))
}

type unbalancedError struct {
	expr string
	c    byte
}

func (e *unbalancedError) Error() string {
	return "unbalanced " + string(e.c) + " in " + e.expr
}

func TestPromQLMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
		err  bool
	}{
		{expr: `tide_jobs`, want: []string{"tide_jobs"}},
		{expr: `sum by (reason) (tide_jobs_pending{queue=~"$queue", reason!="a}b"})`, want: []string{"tide_jobs_pending"}},
		{expr: `histogram_quantile(0.99, sum by (le) (rate(x_bucket[$__rate_interval])))`, want: []string{"x_bucket"}},
		{expr: "a and on() b\nor ignoring(x, y) c offset 5m > bool 2", want: []string{"a", "b", "c"}},
		{expr: `100 * a / clamp_min(sum(b), 1e3) - -c{l='x'}`, want: []string{"a", "b", "c"}},
		{expr: `sum(a) without (instance) * on (node) group_left(reason) b`, want: []string{"a", "b"}},
		{expr: `absent(up_like{job="tide"})`, want: []string{"up_like"}},
		{expr: `${datasource_var} + m`, want: []string{"m"}},
		{expr: `count by(x)(a) + sum without (y) (b) + bylaw`, want: []string{"a", "b", "bylaw"}},
		{expr: `sum(a`, err: true},
		{expr: `a{x="y"`, err: true},
		{expr: `a]`, err: true},
	}
	for _, tt := range tests {
		got, err := promqlMetricNames(tt.expr)
		if (err != nil) != tt.err {
			t.Errorf("%q: error %v, want error %v", tt.expr, err, tt.err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); !tt.err && diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.expr, diff)
		}
	}
}

// grafanaQuery is a query of the dashboard: where it is, and its text.
type grafanaQuery struct {
	where, expr string
}

// grafanaQueries walks the dashboard for every PromQL expression: the
// panels' (and rows' panels') targets, the annotations, and the
// template variables' queries (label_values(metric, label) names
// metric).
func grafanaQueries(t *testing.T, dash map[string]any) []grafanaQuery {
	t.Helper()
	var out []grafanaQuery
	var panels func(list []any)
	panels = func(list []any) {
		for _, p := range list {
			pm := p.(map[string]any)
			title, _ := pm["title"].(string)
			if sub, ok := pm["panels"].([]any); ok {
				panels(sub)
			}
			if pm["type"] == "row" {
				continue
			}
			targets, _ := pm["targets"].([]any)
			if len(targets) == 0 {
				t.Errorf("panel %q has no query", title)
			}
			for _, tg := range targets {
				expr, _ := tg.(map[string]any)["expr"].(string)
				if expr == "" {
					t.Errorf("panel %q has a target without expr", title)
				}
				out = append(out, grafanaQuery{"panel " + title, expr})
			}
		}
	}
	list, _ := dash["panels"].([]any)
	if len(list) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	panels(list)
	if ann, ok := dash["annotations"].(map[string]any); ok {
		for _, a := range ann["list"].([]any) {
			if expr, ok := a.(map[string]any)["expr"].(string); ok {
				out = append(out, grafanaQuery{"annotation " + a.(map[string]any)["name"].(string), expr})
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(\s*(.+?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)
	for _, v := range dash["templating"].(map[string]any)["list"].([]any) {
		vm := v.(map[string]any)
		if vm["type"] != "query" {
			continue
		}
		q, _ := vm["query"].(map[string]any)["query"].(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %v: query %q is not label_values(metric, label)", vm["name"], q)
			continue
		}
		out = append(out, grafanaQuery{"variable " + vm["name"].(string), m[1]})
	}
	return out
}

// TestMonitoringNamesExportedMetrics loads etc/grafana/tide.json and
// etc/prometheus/alerts.yaml and checks that every PromQL expression in
// them parses as far as brackets go and names only metrics a controller
// exports, and that the dashboard covers what issue 25 asks of it.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	h := newHarness(t)
	exported := exportedMetrics(t, h.s)
	for _, name := range []string{"tide_job_gpu_utilization", "tide_jobs", "tide_job_queue_wait_seconds_bucket"} {
		if !exported[name] {
			t.Fatalf("the registry walk missed %s: %v", name, exported)
		}
	}
	check := func(where, expr string) []string {
		names, err := promqlMetricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return nil
		}
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: %q names %s, which the controller does not export", where, expr, n)
			}
		}
		return names
	}

	b, err := os.ReadFile("../etc/grafana/tide.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("etc/grafana/tide.json: %v", err)
	}
	used := map[string]bool{}
	for _, q := range grafanaQueries(t, dash) {
		for _, n := range check("etc/grafana/tide.json "+q.where, q.expr) {
			used[n] = true
		}
	}
	// Issue 25's panels: utilisation, queue depth by reason, wait-time
	// percentiles, fragmentation, node states, borrow/reclaim.
	for _, n := range []string{"tide_gpu_utilization_mean", "tide_job_gpu_utilization", "tide_jobs_pending",
		"tide_job_queue_wait_seconds_bucket", "tide_gpus_stranded", "tide_nodes", "tide_queue_gpus_borrowed",
		"tide_gpu_reclaims_total"} {
		if !used[n] {
			t.Errorf("the dashboard reads no %s", n)
		}
	}

	b, err = os.ReadFile("../etc/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("etc/prometheus/alerts.yaml: %v", err)
	}
	bounds := histogramBounds(t, h.s)
	// The dashboard's queue-wait quantiles must reach a week's wait,
	// not stop at the histogram's last bucket.
	if top := bounds["tide_job_queue_wait_seconds"]; top < 7*24*3600 {
		t.Errorf("tide_job_queue_wait_seconds' largest bucket is %gs: the dashboard's wait quantiles stop there, short of a week", top)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			where := "etc/prometheus/alerts.yaml " + r.Alert
			if r.Alert == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s (group %s): an alert needs a name, a summary and a description", where, g.Name)
			}
			if sev := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, sev) {
				t.Errorf("%s: severity %q, want critical, warning or info", where, sev)
			}
			check(where, r.Expr)
			checkQuantileReach(t, where, r.Expr, bounds)
		}
	}
	// Issue 25's alerts: nodes down, XID errors, stuck queue,
	// controller restarts.
	for _, a := range []string{"TideNodesDown", "TideGPUUnhealthy", "TideQueueStuck", "TideControllerRestarting", "TideControllerDown"} {
		if !slices.Contains(alerts, a) {
			t.Errorf("alerts.yaml has no %s", a)
		}
	}
}

// histogramBounds gathers the controller's registry and returns, per
// histogram, the largest finite upper bound of its buckets.
func histogramBounds(t *testing.T, s *Server) map[string]float64 {
	t.Helper()
	fams, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				if ub := b.GetUpperBound(); !math.IsInf(ub, 1) {
					out[f.GetName()] = max(out[f.GetName()], ub)
				}
			}
		}
	}
	return out
}

// quantileAlert matches an alert on a histogram quantile above a
// threshold: histogram_quantile(q, … NAME_bucket …) > T.
var quantileAlert = regexp.MustCompile(`histogram_quantile\(.*?([a-z_:]+)_bucket.*\)\s*>\s*([0-9.]+)\s*$`)

// checkQuantileReach fails an alert on a histogram quantile whose
// threshold is not below the histogram's largest finite bucket:
// histogram_quantile never reads past that bound (a rank in the +Inf
// bucket reads as the bound), so such an alert can never fire.
func checkQuantileReach(t *testing.T, where, expr string, bounds map[string]float64) {
	t.Helper()
	m := quantileAlert.FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		return
	}
	threshold, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		t.Errorf("%s: threshold %q: %v", where, m[2], err)
		return
	}
	top, ok := bounds[m[1]]
	if !ok {
		t.Errorf("%s: %s is not a histogram the controller exports with buckets", where, m[1])
		return
	}
	if threshold >= top {
		t.Errorf("%s: fires above %g but %s's largest bucket is %g: histogram_quantile never reads more, so the alert can never fire", where, threshold, m[1], top)
	}
}
