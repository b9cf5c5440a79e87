// Package mangen builds Tide's manual pages: one per Slurm-named command
// (sbatch.1, squeue.1, ...), tide.1, tidectld.8, tided.8 and
// tide.yaml.5. Options come from the tables the commands' parsers read
// and the daemons' flag sets, configuration keys from the loaders' Go
// types (with their meaning from docs/configuration.md), so that a page
// cannot miss what the program accepts. cmd/gen-man writes them; `make
// man` runs it.
package mangen
