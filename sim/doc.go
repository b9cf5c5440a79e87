// Package sim replays a job trace against a described cluster through
// the production scheduling core (ctld/sched.Schedule, the very function
// tidectld calls) under a virtual clock, and reports what users feel
// (queueing delay, job completion time, slowdown, starvation) and what
// operators pay for (GPU utilisation, fragmentation).
//
// The engine is a discrete-event loop over arrivals and completions. All
// events of one instant are applied before one scheduling pass; the pass
// sees a snapshot whose nodes are updated in place as jobs start and end
// (no rebuild per event). Simulated nodes finish a job exactly its trace
// duration after it starts; its time limit is that duration rounded up
// to a minute, so backfill has the estimates it needs.
//
// Same trace, cluster, policies and seed give the same Report, byte for
// byte as JSON: the only wall-clock numbers (time per scheduling pass)
// live in Report.Wall, which JSON leaves out.
package sim
