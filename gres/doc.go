// Package gres models GPUs as generic resources: the Device a node reports
// at registration (with its NVLink/PCIe links to the other GPUs of the
// node), the Status it reports with heartbeats, and the Sources an
// inventory comes from. The fake (FakeSource, canned dgx/islands/pcie
// topologies) serves development clusters and tests; the static source
// (StaticGPU, Slurm's gres.conf Links= syntax) serves nodes configured by
// hand. NVML discovery lives in gres/nvml, the only importer of go-nvml,
// so this package stays free of cgo and I/O and the static CLI and the
// scheduling core can import it.
package gres
