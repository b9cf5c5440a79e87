package munge

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParseReply feeds arbitrary bytes to the parsers of what munged
// sends: they never panic, never accept a body length above the limit,
// and what they accept survives a round trip through the marshallers
// the fake munged uses.
func FuzzParseReply(f *testing.F) {
	f.Add(message(msgDecodeReply, marshalDecodeReply(goodDecodeReply())))
	f.Add(message(msgDecodeReply, marshalDecodeReply(decodeReply{errNum: 17, errMsg: "Replayed credential", realm: "r"})))
	f.Add(message(msgEncodeReply, marshalEncodeReply(encodeReply{cred: "MUNGE:AwQFAAC:"})))
	f.Add(message(msgEncodeReply, marshalEncodeReply(encodeReply{errNum: 3, errMsg: "too long"})))
	f.Add([]byte{0, 0x60, 0x6d, 0x4b, 4, 5, 0, 0xff, 0xff, 0xff, 0xff})
	opts := []cmp.Option{cmp.AllowUnexported(decodeReply{}, encodeReply{}), cmpopts.EquateEmpty()}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= headerLen {
			const limit = 1 << 16
			h, err := parseHeader(b[:headerLen], limit)
			if err == nil && h.len > limit {
				t.Fatalf("header accepted a body of %d bytes above the limit %d", h.len, limit)
			}
			b = b[headerLen:]
		}
		if m, err := parseDecodeReply(b); err == nil {
			again, err := parseDecodeReply(marshalDecodeReply(m))
			if err != nil {
				t.Fatalf("re-parsing a marshalled %+v: %v", m, err)
			}
			if d := cmp.Diff(m, again, opts...); d != "" {
				t.Fatalf("decode reply round trip (-first +second):\n%s", d)
			}
		}
		if m, err := parseEncodeReply(b); err == nil {
			again, err := parseEncodeReply(marshalEncodeReply(m))
			if err != nil {
				t.Fatalf("re-parsing a marshalled %+v: %v", m, err)
			}
			if d := cmp.Diff(m, again, opts...); d != "" {
				t.Fatalf("encode reply round trip (-first +second):\n%s", d)
			}
		}
	})
}
