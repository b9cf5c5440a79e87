package opts

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitDirective(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		err  string
	}{
		{name: "several options", in: " -N 2 --ntasks=4", want: []string{"-N", "2", "--ntasks=4"}},
		{name: "double quotes", in: ` --job-name="my job"`, want: []string{"--job-name=my job"}},
		{name: "single quotes", in: ` -o 'out %j.txt'`, want: []string{"-o", "out %j.txt"}},
		{name: "quotes keep a hash", in: ` --comment="a # b"`, want: []string{"--comment=a # b"}},
		{name: "trailing comment", in: " -p gpu   # the GPU partition", want: []string{"-p", "gpu"}},
		{name: "hash ends the word too", in: " --comment=a#b c", want: []string{"--comment=a"}},
		{name: "backslash escapes", in: ` --job-name=a\ b\#c`, want: []string{"--job-name=a b#c"}},
		{name: "empty quotes are a word", in: ` --comment ""`, want: []string{"--comment", ""}},
		{name: "tabs", in: "\t-N\t2", want: []string{"-N", "2"}},
		{name: "nothing", in: "", want: nil},
		{name: "unmatched quote", in: ` -J "oops`, err: "Unmatched `\"`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := splitDirective(tt.in)
			if errText(err) != tt.err {
				t.Fatalf("error = %q, want %q", errText(err), tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDirectiveWords(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   []word
		err    string
	}{
		{
			name:   "reads until the first command",
			script: "#!/bin/bash\n#SBATCH -N 2\n\n# plain comment\n   # indented comment\n#SBATCH -J x\nhostname\n#SBATCH -p late\n",
			want:   []word{{"-N", 2}, {"2", 2}, {"-J", 6}, {"x", 6}},
		},
		{
			name:   "magic word must stand alone",
			script: "#!/bin/sh\n#SBATCHED -N 2\n#SBATCH\t-n 3\n",
			want:   []word{{"-n", 3}, {"3", 3}},
		},
		{
			name:   "indented directive is a comment",
			script: "#!/bin/sh\n  #SBATCH -N 2\n#SBATCH -n 1\n",
			want:   []word{{"-n", 3}, {"1", 3}},
		},
		{
			name:   "no directives",
			script: "#!/bin/sh\necho hi\n",
		},
		{
			name:   "unmatched quote names the line",
			script: "#!/bin/sh\n#SBATCH -J 'x\n",
			err:    "job.sh: line 2: Unmatched `'` in [#SBATCH -J 'x]",
		},
		{
			name:   "hetjob separator",
			script: "#!/bin/sh\n#SBATCH -N 1\n#SBATCH hetjob\n",
			err:    "job.sh: line 3: heterogeneous jobs (#SBATCH hetjob) are not supported yet",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := directiveWords("job.sh", tt.script)
			if errText(err) != tt.err {
				t.Fatalf("error = %q, want %q", errText(err), tt.err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(word{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckScript(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
	}{
		{name: "good", body: "#!/bin/sh\ntrue\n"},
		{name: "empty", body: "", want: []string{"Batch script is empty!"}},
		{name: "whitespace", body: " \n\t\n", want: []string{"Batch script contains only whitespace!"}},
		{name: "no shebang", body: "echo hi\n", want: []string{
			"This does not look like a batch script.  The first",
			"line must start with #! followed by the path to an interpreter.",
			"For instance: #!/bin/sh",
		}},
		{name: "DOS line breaks", body: "#!/bin/sh\r\ntrue\r\n", want: []string{
			"Batch script contains DOS line breaks (\\r\\n)",
			"instead of expected UNIX line breaks (\\n).",
		}},
		{name: "NUL", body: "#!/bin/sh\n\x00\n", want: []string{"The Slurm controller does not allow scripts that contain a NULL character '\\0'."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, checkScript(tt.body)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
