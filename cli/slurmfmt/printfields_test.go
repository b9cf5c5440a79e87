package slurmfmt

import (
	"strings"
	"testing"
)

// TestPrintFields checks Slurm's print_fields layout: a negative width
// left-justifies the header and the values, a text value wider than its
// column ends in '+', numbers are never cut, and -p/-P separate with '|'.
func TestPrintFields(t *testing.T) {
	cols := []PrintColumn{{Name: "JobID", Width: -8, Kind: FieldStr}, {Name: "MaxRSS", Width: 6, Kind: FieldStr}, {Name: "NTasks", Width: 3, Kind: FieldNum}}
	rows := [][]string{{"7.0", "1.50G", "8"}, {"7.batch\x1b", "verylong", "12345"}}
	tests := []struct {
		layout FieldsLayout
		header bool
		want   string
	}{
		{FieldsFixed, true, "JobID    MaxRSS NTa \n-------- ------ --- \n7.0       1.50G   8 \n7.batch+ veryl+ 12345 \n"},
		{FieldsParsable, true, "JobID|MaxRSS|NTasks|\n7.0|1.50G|8|\n7.batch\\x1b|verylong|12345|\n"},
		{FieldsParsable2, false, "7.0|1.50G|8\n7.batch\\x1b|verylong|12345\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := PrintFields(&b, cols, rows, tt.layout, "", tt.header); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("layout %d:\n got %q\nwant %q", tt.layout, b.String(), tt.want)
		}
	}
}
