package api

import "time"

// Usage over time (issue 25): the controller samples every running job
// each job_usage.interval and keeps a compact series per job, for the
// API (GET /api/v1/jobs/{id}/usage, GET /api/v1/jobs/usage), scontrol
// show job -d, the dashboard and the per-job metrics. GPU figures come
// from the nodes' GPU readings of the GPUs the job holds (NVML, or the
// fake GPUs' simulated load); CPU and memory from tided's samples of
// the job's steps (acct_gather_frequency).

// EventIdleGPU is a job's trail entry when it has held GPUs without
// using them (their mean utilisation under job_usage.idle_gpu_threshold
// for job_usage.idle_gpu_after), and again when it uses them again.
const EventIdleGPU = "idle_gpu"

// UsageSample is one sample of a job's usage.
type UsageSample struct {
	Time time.Time `json:"time"`
	// GPU: the job's GPUs were read (some node of the job reported
	// their use); GPUUtil and GPUMem mean nothing otherwise.
	GPU bool `json:"gpu"`
	// GPUUtil is the mean utilisation of the job's GPUs, in percent
	// (0–100). A slice shows the utilisation of its GPU, which it shares.
	GPUUtil float64 `json:"gpu_util"`
	// GPUMem is the device memory in use on the job's whole GPUs, plus
	// what its processes hold on the GPUs it shares, in bytes.
	GPUMem uint64 `json:"gpu_mem"`
	// CPU: the job's CPU time grew between tided's last two reports;
	// CPUs is by how much per second of wall time (CPUs kept busy).
	CPU  bool    `json:"cpu"`
	CPUs float64 `json:"cpus"`
	// RSS is the resident memory of the job's running steps' tasks in
	// bytes, as tided last reported it: each task's highest sample so
	// far (a peak that may since have been freed).
	RSS uint64 `json:"rss"`
}

// UsagePoint is one point of a job's series: the samples of the
// SpanSeconds from Time, merged.
type UsagePoint struct {
	Time        time.Time `json:"time"`
	SpanSeconds int64     `json:"span_seconds"`
	// Samples counts the samples merged here, GPUSamples and CPUSamples
	// those with GPU and CPU readings (0: the fields mean nothing).
	Samples    int `json:"samples"`
	GPUSamples int `json:"gpu_samples"`
	CPUSamples int `json:"cpu_samples"`
	// GPUUtil is the mean of the samples' GPUUtil, GPUUtilMax the
	// highest; GPUMem the highest GPUMem (bytes).
	GPUUtil    float64 `json:"gpu_util"`
	GPUUtilMax float64 `json:"gpu_util_max"`
	GPUMem     uint64  `json:"gpu_mem"`
	// CPUs is the mean of the samples' CPUs; RSS the highest RSS.
	CPUs float64 `json:"cpus"`
	RSS  uint64  `json:"rss"`
}

// JobUsage is the controller's usage series of one incarnation of a
// job: its points, oldest first, and its latest sample. The series
// keeps at most job_usage.points points: when they are used up,
// neighbours merge pairwise and StepSeconds doubles, so that the points
// always cover the whole run. Finished jobs' series stay in memory for
// job_usage.keep; a restarted controller starts them afresh.
type JobUsage struct {
	JobID   uint64 `json:"job_id"`
	Restart int    `json:"restart"`
	UserID  uint32 `json:"user_id"`
	User    string `json:"user,omitempty"`
	// Queue is the job's queue (Slurm account), "" for none.
	Queue string `json:"queue,omitempty"`
	// GPUs counts the GPUs the job holds (whole, or those its slices
	// are on).
	GPUs int `json:"gpus"`
	// Start is where the first point begins (half an interval before
	// the first sample, so that samples sit mid-point), End when the job
	// was seen no longer running (zero while it runs).
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// StepSeconds is the time each new point covers now.
	StepSeconds int64        `json:"step_seconds"`
	Points      []UsagePoint `json:"points"`
	Last        *UsageSample `json:"last,omitempty"`
	// GPUUtilMean is the mean GPU utilisation over the whole series
	// (the samples with GPU readings); GPUMemMax and RSSMax the highest.
	GPUUtilMean float64 `json:"gpu_util_mean"`
	GPUMemMax   uint64  `json:"gpu_mem_max"`
	RSSMax      uint64  `json:"rss_max"`
	// IdleSince is when the job's GPUs last went under the idle
	// threshold (zero while they are used, or unread); IdleFlagged when
	// that stretch reached job_usage.idle_gpu_after and the job was
	// flagged (an EventIdleGPU; zero when not flagged).
	IdleSince   time.Time `json:"idle_since,omitzero"`
	IdleFlagged time.Time `json:"idle_flagged,omitzero"`
}

// JobUsageList answers GET /api/v1/jobs/usage: the series of the jobs
// asked for that the caller may see, without their points.
type JobUsageList struct {
	Jobs []JobUsage `json:"jobs"`
}
