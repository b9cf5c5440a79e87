// Package opts parses sbatch's options exactly as Slurm 22.05 sbatch
// does: a getopt_long-compatible scanner (long-option prefixes, bundled
// short options, optional arguments only after '='), the complete 22.05
// option table, #SBATCH directives read with shell-like quoting, the
// SBATCH_* environment, and --export. Precedence is command line over
// environment over directives. It is pure: files, environment, stdin and
// the clock come in through Input, so every path is testable without a
// controller.
package opts
