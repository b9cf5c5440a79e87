package ctld

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
