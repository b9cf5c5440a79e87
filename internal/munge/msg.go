package munge

import (
	"encoding/binary"
	"fmt"
)

// Message header: magic (4 bytes), version (1), type (1), retry (1),
// body length (4), all big-endian.
const (
	headerLen  = 11
	msgMagic   = 0x00606D4B
	msgVersion = 4
)

// msgType is munged's message type (enum m_msg_type).
type msgType uint8

const (
	msgEncodeRequest msgType = 2
	msgEncodeReply   msgType = 3
	msgDecodeRequest msgType = 4
	msgDecodeReply   msgType = 5
)

func (t msgType) String() string {
	switch t {
	case msgEncodeRequest:
		return "encode request"
	case msgEncodeReply:
		return "encode reply"
	case msgDecodeRequest:
		return "decode request"
	case msgDecodeReply:
		return "decode reply"
	}
	return fmt.Sprintf("type %d", uint8(t))
}

// Request defaults: the value 1 asks munged for its default cipher, MAC
// and compression, TTL 0 for its default time-to-live, and uid/gid "any"
// lets anyone decode the credential.
const (
	optDefault = 1
	ttlDefault = 0
	idAny      = ^uint32(0)
)

// Limits. MUNGE 0.5.15 (Debian 12 and 13) reads no request body above
// 1 MiB; later versions allow 2 MiB. Staying within the older limit keeps
// every credential made here decodable by every munged of a cluster.
const (
	// MaxPayload is the largest payload Encode puts into a credential:
	// the credential, base64 of the payload and about 120 bytes more,
	// then fits in a decode request to any munged.
	MaxPayload = 512 << 10
	// maxRequest is the largest request body munged 0.5.15 reads.
	maxRequest = 1 << 20
	// maxCredential is the longest credential Decode sends: its request
	// body is the length, the credential and a NUL.
	maxCredential = maxRequest - 5
	// maxReply bounds the body of a reply we accept: the credential
	// (encode) or payload (decode) of a request within maxRequest, plus
	// fixed fields and strings of at most 255 bytes each.
	maxReply = maxRequest + 1024
)

// header is a message header after its magic and version were checked.
type header struct {
	typ   msgType
	retry uint8
	len   uint32
}

// appendHeader appends the header of a message of type t with a body of
// n bytes.
func appendHeader(b []byte, t msgType, retry uint8, n int) []byte {
	b = binary.BigEndian.AppendUint32(b, msgMagic)
	b = append(b, msgVersion, byte(t), retry)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// parseHeader checks a received header: magic, version, and a body
// length within max.
func parseHeader(b []byte, max uint32) (header, error) {
	if len(b) != headerLen {
		return header{}, fmt.Errorf("header of %d bytes, want %d", len(b), headerLen)
	}
	if m := binary.BigEndian.Uint32(b); m != msgMagic {
		return header{}, fmt.Errorf("bad magic %#08x (not munged?)", m)
	}
	if v := b[4]; v != msgVersion {
		return header{}, fmt.Errorf("message version %d, this client speaks %d", v, msgVersion)
	}
	h := header{typ: msgType(b[5]), retry: b[6], len: binary.BigEndian.Uint32(b[7:])}
	if h.len > max {
		return header{}, fmt.Errorf("body of %d bytes exceeds the limit of %d", h.len, max)
	}
	return h, nil
}

// encodeRequestBody is the body of an encode request with default
// options: cipher, MAC, zip, realm length 0, TTL, auth uid, auth gid,
// payload length, payload.
func encodeRequestBody(payload []byte, ttl uint32) []byte {
	b := make([]byte, 0, 3+1+4+4+4+4+len(payload))
	b = append(b, optDefault, optDefault, optDefault, 0)
	b = binary.BigEndian.AppendUint32(b, ttl)
	b = binary.BigEndian.AppendUint32(b, idAny)
	b = binary.BigEndian.AppendUint32(b, idAny)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// decodeRequestBody is the body of a decode request: the credential's
// length and the credential, NUL-terminated as munged expects.
func decodeRequestBody(cred string) []byte {
	b := make([]byte, 0, 4+len(cred)+1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(cred)+1))
	b = append(b, cred...)
	return append(b, 0)
}

// encodeReply is an encode reply: munged's error number and message, and
// on success the credential.
type encodeReply struct {
	errNum uint8
	errMsg string
	cred   string
}

// decodeReply is a decode reply. The credential's fields are set on
// success and, by munged, also for expired, rewound and replayed
// credentials.
type decodeReply struct {
	errNum       uint8
	errMsg       string
	cipher       uint8
	mac          uint8
	zip          uint8
	realm        string
	ttl          uint32
	addr         []byte
	time0, time1 uint32
	credUID      uint32
	credGID      uint32
	authUID      uint32
	authGID      uint32
	payload      []byte
}

// reader takes fields off a message body and remembers the first
// problem, so that the parsers read like the layout they follow.
type reader struct {
	b     []byte
	field string // the field that did not fit, if any
}

func (r *reader) fail(field string) {
	if r.field == "" {
		r.field = field
	}
	r.b = nil
}

func (r *reader) u8(field string) uint8 {
	if r.field != "" || len(r.b) < 1 {
		r.fail(field)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u32(field string) uint32 {
	if r.field != "" || len(r.b) < 4 {
		r.fail(field)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

// bytes returns the next n bytes, or nil with the reader failed when the
// body has fewer: a length field is never trusted beyond the body, so a
// huge one costs nothing.
func (r *reader) bytes(field string, n uint32) []byte {
	if r.field != "" || uint64(n) > uint64(len(r.b)) {
		r.fail(field)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// done reports the first field that did not fit, or bytes left over.
func (r *reader) done(what string) error {
	if r.field != "" {
		return fmt.Errorf("%s truncated at %s", what, r.field)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%s has %d bytes after its last field", what, len(r.b))
	}
	return nil
}

// cString turns a NUL-terminated string field into a Go string.
func cString(b []byte) string {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return string(b)
}

// parseEncodeReply parses an encode reply body.
func parseEncodeReply(body []byte) (encodeReply, error) {
	r := reader{b: body}
	var m encodeReply
	m.errNum = r.u8("error number")
	m.errMsg = cString(r.bytes("error message", uint32(r.u8("error length"))))
	cred := r.bytes("credential", r.u32("credential length"))
	if err := r.done("encode reply"); err != nil {
		return encodeReply{}, err
	}
	m.cred = cString(cred)
	if m.errNum != 0 {
		return m, nil
	}
	if m.cred == "" {
		return encodeReply{}, fmt.Errorf("encode reply has no credential")
	}
	// The credential goes into HTTP headers and command lines: munged
	// armors it in base64 between "MUNGE:" and ":", so anything else is
	// not munged's.
	for i := 0; i < len(m.cred); i++ {
		if c := m.cred[i]; c <= ' ' || c > '~' {
			return encodeReply{}, fmt.Errorf("encode reply: credential has byte %#02x at offset %d", c, i)
		}
	}
	return m, nil
}

// parseDecodeReply parses a decode reply body.
func parseDecodeReply(body []byte) (decodeReply, error) {
	r := reader{b: body}
	var m decodeReply
	m.errNum = r.u8("error number")
	m.errMsg = cString(r.bytes("error message", uint32(r.u8("error length"))))
	m.cipher = r.u8("cipher")
	m.mac = r.u8("mac")
	m.zip = r.u8("zip")
	m.realm = cString(r.bytes("realm", uint32(r.u8("realm length"))))
	m.ttl = r.u32("ttl")
	addrLen := r.u8("address length")
	if addrLen > 4 {
		// An IPv4 address, as munged's own client insists.
		return decodeReply{}, fmt.Errorf("decode reply: origin address of %d bytes, want at most 4", addrLen)
	}
	m.addr = r.bytes("address", uint32(addrLen))
	m.time0 = r.u32("encode time")
	m.time1 = r.u32("decode time")
	m.credUID = r.u32("uid")
	m.credGID = r.u32("gid")
	m.authUID = r.u32("auth uid")
	m.authGID = r.u32("auth gid")
	m.payload = r.bytes("payload", r.u32("payload length"))
	if err := r.done("decode reply"); err != nil {
		return decodeReply{}, err
	}
	return m, nil
}
