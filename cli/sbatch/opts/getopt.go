package opts

import "github.com/tide-hpc/tide/cli/getopt"

// sbatch reads its command line and #SBATCH directives with the option
// engine every Slurm-named command shares (cli/getopt). These names let
// sbatch's table and parser, and the srun and salloc tables built on
// them, be written as before.
type (
	// ArgKind is getopt.ArgKind.
	ArgKind = getopt.ArgKind
	// Spec is getopt.Spec.
	Spec = getopt.Spec
	// Match is getopt.Match.
	Match = getopt.Match
	// GetoptError is getopt.Error.
	GetoptError = getopt.Error
	// Getopt is getopt.Parser.
	Getopt = getopt.Parser
)

// The argument kinds, as getopt's.
const (
	NoArg       = getopt.NoArg
	RequiredArg = getopt.RequiredArg
	OptionalArg = getopt.OptionalArg
)

// NewGetopt is getopt.New: a parser over specs that stops at the first
// operand, as sbatch, srun and salloc do.
func NewGetopt(specs []Spec) *Getopt { return getopt.New(specs) }

// id is the option's identity (getopt.Spec.Key): options with one id are
// one option under several names.
func (o *option) id() string { return o.Key() }
