// Package sim replays a job trace against a described cluster through
// the production scheduling core (ctld/sched.Schedule, the very function
// tidectld calls) under a virtual clock, and reports what users feel
// (queueing delay, job completion time, slowdown, starvation) and what
// operators pay for (GPU utilisation, fragmentation).
//
// The engine is a discrete-event loop over arrivals and completions. All
// events of one instant are applied before one scheduling pass; the pass
// sees a snapshot whose nodes are updated in place as jobs start and end
// (no rebuild per event). Simulated nodes finish a job its trace
// duration after it starts (or at its time limit, when the limit is
// shorter); the time limit the scheduler plans with is a modelled user
// estimate, the trace's own limit, or the duration rounded up to a
// minute (EstimateMode, estimates.go).
//
// Same trace, cluster, policies and seeds give the same Report, byte for
// byte as JSON: the only wall-clock numbers (time per scheduling pass)
// live in Report.Wall, which JSON leaves out. Compare replays each
// policy under one seed or several (seeds.go, with the median and range
// of every metric), and the report shows waits per job-size class and
// each queue's share of the cluster over time (fairness.go).
package sim
