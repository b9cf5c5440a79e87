package ctld

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// cachedGatherer gathers from g at most once per period. The state
// collector takes the controller's lock and walks every job and node;
// four scrapers scraping at once used to quadruple sbatch's latency.
// Scrapes that come while a gathering runs wait for it and share its
// result; scrapes within period of it get the same result. The
// families are only read by the encoders, so sharing them is safe.
type cachedGatherer struct {
	g      prometheus.Gatherer
	period time.Duration
	now    func() time.Time

	mu    sync.Mutex
	at    time.Time
	valid bool
	mfs   []*dto.MetricFamily
	err   error
	// gathered counts the gatherings from g (for tests); gatherings
	// too, readable while a gathering runs (the metric of itself).
	gathered   int
	gatherings atomic.Int64
}

var _ prometheus.Gatherer = (*cachedGatherer)(nil)

func newCachedGatherer(g prometheus.Gatherer, period time.Duration, now func() time.Time) *cachedGatherer {
	return &cachedGatherer{g: g, period: period, now: now}
}

// Gather returns the cached families, gathering them anew when they are
// older than the period.
func (c *cachedGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.valid && now.Sub(c.at) < c.period && !now.Before(c.at) {
		return c.mfs, c.err
	}
	c.gatherings.Add(1)
	c.mfs, c.err = c.g.Gather()
	c.at, c.valid = now, true
	c.gathered++
	return c.mfs, c.err
}

// scrapeCache answers scrapes with bytes encoded at most once per
// period for each format and compression they ask for: encoding the
// families as text and compressing them (Prometheus and Go's client ask
// for gzip) cost the controller about 0.35 ms a scrape, so four scrapers
// in a loop took more CPU than the submissions beside them.
type scrapeCache struct {
	g      prometheus.Gatherer
	period time.Duration
	now    func() time.Time

	mu     sync.Mutex
	bodies map[scrapeKey]scrapeBody
}

type scrapeKey struct {
	format expfmt.Format
	gzip   bool
}

type scrapeBody struct {
	at   time.Time
	data []byte
	err  error
}

func newScrapeCache(g prometheus.Gatherer, period time.Duration, now func() time.Time) *scrapeCache {
	return &scrapeCache{g: g, period: period, now: now, bodies: map[scrapeKey]scrapeBody{}}
}

// ServeHTTP answers one scrape.
func (c *scrapeCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := scrapeKey{format: expfmt.Negotiate(r.Header), gzip: acceptsGzip(r.Header.Get("Accept-Encoding"))}
	b := c.body(k)
	if b.err != nil {
		http.Error(w, "gather metrics: "+b.err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(k.format))
	if k.gzip {
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b.data)))
	_, _ = w.Write(b.data)
}

// body returns k's encoding, made anew when it is older than the period.
// Scrapes that come while one is made wait for it.
func (c *scrapeCache) body(k scrapeKey) scrapeBody {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if b, ok := c.bodies[k]; ok && now.Sub(b.at) < c.period && !now.Before(b.at) {
		return b
	}
	b := scrapeBody{at: now}
	b.data, b.err = c.encode(k)
	c.bodies[k] = b
	return b
}

func (c *scrapeCache) encode(k scrapeKey) ([]byte, error) {
	mfs, err := c.g.Gather()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	var out io.Writer = &buf
	var zw *gzip.Writer
	if k.gzip {
		zw = gzip.NewWriter(&buf)
		out = zw
	}
	enc := expfmt.NewEncoder(out, k.format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, fmt.Errorf("encode %s: %w", mf.GetName(), err)
		}
	}
	if cl, ok := enc.(expfmt.Closer); ok {
		if err := cl.Close(); err != nil {
			return nil, err
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// acceptsGzip reports whether an Accept-Encoding value allows gzip (and
// does not refuse it with q=0).
func acceptsGzip(v string) bool {
	for _, part := range strings.Split(v, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
