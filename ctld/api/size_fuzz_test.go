package api

import "testing"

// FuzzParseMemMB checks that ParseMemMB never answers a negative size
// (ParseFloat reads "nan", which every range check passes) or one over
// MaxMemMB, that FormatMemMB's text reads back exactly (the bound was
// on the number before the unit, so "1070000.1T" gave megabytes that
// read back as too many), and that every refusal is ErrInvalidArgument.
func FuzzParseMemMB(f *testing.F) {
	for _, s := range []string{
		"100", "100M", "4G", "1T", "512K", "1.5G", "0", "", "abc", "-1G", "4X", " 64G ", "1099511627776",
		"1099511627777", "1099511627776T", "1070000.1T", "1048576T", "1048577T", "nanM", "NaN", "nanG", "infM", "+InfG", "-0", "1e3", "1e400M",
		"0x1p4", "1_000", "4Gi", "4GiB", "1.0000000001K", "\x00", "4G\x00", "\xffM", "9223372036854775807",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mb, err := ParseMemMB(s)
		if err != nil {
			wantInvalid(t, "ParseMemMB("+s+")", err)
			return
		}
		if mb < 0 || mb > MaxMemMB {
			t.Fatalf("ParseMemMB(%q) = %d, outside 0..MaxMemMB", s, mb)
		}
		shown := FormatMemMB(mb)
		back, err := ParseMemMB(shown)
		if err != nil || back != mb {
			t.Fatalf("ParseMemMB(%q) = %d shown as %q, read back as %d, %v", s, mb, shown, back, err)
		}
	})
}
