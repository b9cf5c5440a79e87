// Package nvml discovers a node's GPUs through NVML (go-nvml): inventory
// with NVLink and PCIe links, health and usage for heartbeats, and XID
// event watching. It is the only package of Tide that imports go-nvml,
// which needs cgo; everything it returns is plain gres data.
//
// Every entry point calls Init first and nothing else when Init fails:
// go-nvml loads libnvidia-ml lazily, and any call after a failed Init
// aborts the process with a symbol lookup error that Go cannot recover.
// Functions newer than some drivers (NUMA node, NVLink far-end type) are
// looked up in the library before they are called, for the same reason.
package nvml
