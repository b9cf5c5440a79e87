// Package gres models GPUs as generic resources: the Device a node reports,
// and the fake inventory that development clusters and tests use. NVML
// discovery and GPU slicing arrive with the GPU issue; this package stays
// free of I/O so the scheduling core can import it.
package gres
