package listing

// The binary listing: a codec for api.Job compiled by reflection into a
// plan of field offsets, at first use. It replaces encoding/gob, whose
// package init alone cost every CLI start about 0.1 ms whether or not the
// command listed jobs.
//
// A stream is the byte streamVersion, the job count (uvarint), then each
// job: its exported fields in declaration order, embedded structs
// flattened in place, with no names or tags. The reader must therefore
// hold the very same api.Job as the writer; the schema fingerprint, a
// hash of the plan's description carried in the media type, ensures it:
// the controller answers in this form only to a client whose fingerprint
// is its own, and in JSON to any other.
//
// Values: bool one byte (0 or 1); signed integers zigzag varints,
// unsigned ones uvarints; floats IEEE 754 little-endian; strings and
// slices a uvarint length then the bytes or elements, an empty slice
// reading back as nil as it did with gob; arrays their elements; pointers
// a byte (0 nil, 1 set) then the value; time.Time its instant and zone
// offset (see timeZero), read back in the local zone when that has the
// offset, else in a fixed zone, as Time.UnmarshalBinary does; the
// monotonic reading and zone names are dropped. (Time.MarshalBinary,
// which gob used, garbles zone offsets of negative seconds, such as
// the LMT of American zones.)

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tide-hpc/tide/ctld/api"
)

// mediaJobsBase is the binary listing's media type without its schema
// parameter.
const mediaJobsBase = "application/x-tide-jobs"

// streamVersion opens every stream. Bump it when the encoding rules above
// change; changes of api.Job change the fingerprint instead. It is part
// of the fingerprint too, so that a client and controller that encode
// differently never agree on the binary form.
const streamVersion byte = 0xB1

// The first byte of an encoded time.Time.
const (
	timeZero   = 0 // the zero Time; nothing follows
	timeUTC    = 1 // in UTC; then Unix seconds (varint), nanoseconds (uvarint)
	timeOffset = 2 // then the zone offset in seconds (varint), seconds, nanoseconds
)

// errCorrupt is wrapped by every decoding error of a malformed stream.
var errCorrupt = errors.New("corrupt job listing")

// jobSchema is the plan of api.Job, compiled at first use so that a CLI
// command that lists nothing pays nothing for it.
var jobSchema = sync.OnceValues(func() (*plan, error) {
	return compile(reflect.TypeFor[api.Job]())
})

// MediaJobs returns the media type of binary job listings, with the
// schema fingerprint of this build's api.Job:
// "application/x-tide-jobs; schema=<16 hex digits>". The Go client sends
// it in Accept on listings and the controller answers with it as
// Content-Type. JSON stays the API's format; the Go client takes the
// binary form because decoding 10,000 jobs from JSON costs ~95 ms, from
// it ~6 ms, and squeue's latency is measured with that many pending.
// MediaJobs returns "" if api.Job cannot be encoded (a field of a kind
// the codec lacks; TestJobPlanCompiles catches that), and listings then
// travel as JSON.
func MediaJobs() string {
	return mediaJobs()
}

var mediaJobs = sync.OnceValue(func() string {
	p, err := jobSchema()
	if err != nil {
		return ""
	}
	return mediaJobsBase + "; schema=" + p.fingerprint
})

// AcceptsJobs reports whether an Accept header asks for binary listings
// of exactly this build's api.Job (see MediaJobs). A client built with
// another api.Job sends another fingerprint and gets JSON.
func AcceptsJobs(accept string) bool {
	p, err := jobSchema()
	if err != nil {
		return false
	}
	for entry := range strings.SplitSeq(accept, ",") {
		typ, params, _ := strings.Cut(entry, ";")
		if !strings.EqualFold(strings.TrimSpace(typ), mediaJobsBase) {
			continue
		}
		for param := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(param, "=")
			if strings.EqualFold(strings.TrimSpace(k), "schema") && strings.Trim(strings.TrimSpace(v), `"`) == p.fingerprint {
				return true
			}
		}
	}
	return false
}

// AppendJobs appends jobs as a binary listing to b. It fails only when
// api.Job has no plan (see MediaJobs).
func AppendJobs(b []byte, jobs []api.Job) ([]byte, error) {
	p, err := jobSchema()
	if err != nil {
		return b, err
	}
	b = append(b, streamVersion)
	b = binary.AppendUvarint(b, uint64(len(jobs)))
	e := encoder{b: b}
	for i := range jobs {
		e.value(p, unsafe.Pointer(&jobs[i]))
	}
	return e.b, nil
}

// WriteJobs writes jobs as a binary listing to w, in pieces of about
// 64 KiB, so that the whole encoded listing is never in memory at once.
func WriteJobs(w io.Writer, jobs []api.Job) error {
	p, err := jobSchema()
	if err != nil {
		return err
	}
	const chunk = 64 << 10
	e := encoder{b: make([]byte, 0, chunk+4<<10)}
	e.b = append(e.b, streamVersion)
	e.b = binary.AppendUvarint(e.b, uint64(len(jobs)))
	for i := range jobs {
		e.value(p, unsafe.Pointer(&jobs[i]))
		if len(e.b) >= chunk {
			if _, err := w.Write(e.b); err != nil {
				return err
			}
			e.b = e.b[:0]
		}
	}
	_, err = w.Write(e.b)
	return err
}

// ReadJobs reads a listing written by WriteJobs or AppendJobs to its end.
// A malformed listing gives an error wrapping errCorrupt; it never
// panics, and what it allocates is bounded by the listing's length.
func ReadJobs(r io.Reader) ([]api.Job, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read listing: %w", err)
	}
	return decodeJobs(b)
}

// decodeJobs decodes a listing. The strings of the jobs it returns point
// into b, which must therefore never change afterwards: squeue's 10,000
// jobs then cost no allocation per string.
func decodeJobs(b []byte) ([]api.Job, error) {
	p, err := jobSchema()
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || b[0] != streamVersion {
		return nil, fmt.Errorf("decode listing header: %w: not a tide job listing (version %s)", errCorrupt, firstByte(b))
	}
	d := decoder{b: b[1:]}
	n := d.count(p.min)
	if d.err != nil {
		return nil, fmt.Errorf("decode listing header: %w", d.err)
	}
	jobs := make([]api.Job, n)
	for i := range jobs {
		d.value(p, unsafe.Pointer(&jobs[i]))
		if d.err != nil {
			return nil, fmt.Errorf("decode listing job %d of %d: %w", i+1, n, d.err)
		}
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("decode listing: %w: %d bytes after the last job", errCorrupt, len(d.b))
	}
	return jobs, nil
}

func firstByte(b []byte) string {
	if len(b) == 0 {
		return "none, empty body"
	}
	return fmt.Sprintf("%#x", b[0])
}

// opKind is how a plan encodes a value.
type opKind uint8

const (
	opBool  opKind = iota
	opInt          // size bytes, zigzag varint
	opUint         // size bytes, uvarint
	opFloat        // size bytes, IEEE 754 little-endian
	opString
	opTime
	opSlice
	opArray
	opPtr
	opStruct
)

// plan encodes and decodes one type.
type plan struct {
	kind opKind
	typ  reflect.Type
	size uintptr // bytes of one value in memory
	// fields are a struct's exported fields, those of nested structs
	// (embedded or not) flattened in with their offsets, so that no
	// leaf is an opStruct.
	fields []leaf
	elem   *plan // the element of opSlice, opArray and opPtr
	n      int   // the length of opArray
	// min is the fewest bytes a value encodes to; a decoder bounds a
	// slice's length by the input left divided by it.
	min int
	// fingerprint is the hash of the plan's description (hex), set on
	// the plan compile returns.
	fingerprint string
}

// leaf is a field of a struct plan.
type leaf struct {
	off uintptr
	p   *plan
	// zero0 is set when the byte 0 alone encodes the zero value, which
	// is how most fields of a listed job are sent: the decoder then
	// skips the field, its memory being zero already.
	zero0 bool
}

var timeType = reflect.TypeFor[time.Time]()

// compile builds the plan of t and its fingerprint. It fails on a kind
// the codec lacks (maps, interfaces, channels, functions, complex
// numbers, unsafe pointers), on recursive types, and on slices of values
// that encode to nothing.
func compile(t reflect.Type) (*plan, error) {
	c := compiler{busy: map[reflect.Type]bool{}}
	var desc strings.Builder
	desc.WriteString("tide-jobs/")
	desc.WriteString(strconv.Itoa(int(streamVersion)))
	desc.WriteByte(' ')
	p, err := c.plan(t, &desc)
	if err != nil {
		return nil, fmt.Errorf("listing codec: %s%w", t, err)
	}
	h := fnv.New64a()
	h.Write([]byte(desc.String()))
	p.fingerprint = fmt.Sprintf("%016x", h.Sum64())
	return p, nil
}

type compiler struct {
	busy map[reflect.Type]bool // structs being compiled, to refuse recursion
}

// planError is why a type has no plan. Its path (".Field", "[]") grows
// as it travels up, so that compiling pays for no path when it succeeds.
type planError struct {
	path string
	msg  string
}

func (e *planError) Error() string { return e.path + ": " + e.msg }

// within prefixes err's path with step.
func within(step string, err error) error {
	if pe, ok := err.(*planError); ok {
		pe.path = step + pe.path
	}
	return err
}

// plan compiles t, writing its canonical description (field names and
// wire kinds, nested) to desc.
func (c *compiler) plan(t reflect.Type, desc *strings.Builder) (*plan, error) {
	if t == timeType {
		desc.WriteString("time")
		return c.scalar(opTime, t, 1), nil
	}
	switch t.Kind() {
	case reflect.Bool:
		desc.WriteString("bool")
		return c.scalar(opBool, t, 1), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		desc.WriteString("int")
		desc.WriteString(strconv.Itoa(t.Bits()))
		return c.scalar(opInt, t, 1), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		desc.WriteString("uint")
		desc.WriteString(strconv.Itoa(t.Bits()))
		return c.scalar(opUint, t, 1), nil
	case reflect.Float32, reflect.Float64:
		desc.WriteString("float")
		desc.WriteString(strconv.Itoa(t.Bits()))
		return c.scalar(opFloat, t, int(t.Size())), nil
	case reflect.String:
		desc.WriteString("string")
		return c.scalar(opString, t, 1), nil
	case reflect.Slice:
		desc.WriteString("[]")
		elem, err := c.plan(t.Elem(), desc)
		if err != nil {
			return nil, within("[]", err)
		}
		if elem.min == 0 {
			return nil, &planError{msg: "slice of " + t.Elem().String() + ", which encodes to nothing"}
		}
		return &plan{kind: opSlice, typ: t, size: t.Size(), elem: elem, min: 1}, nil
	case reflect.Array:
		desc.WriteByte('[')
		desc.WriteString(strconv.Itoa(t.Len()))
		desc.WriteByte(']')
		elem, err := c.plan(t.Elem(), desc)
		if err != nil {
			return nil, within("[]", err)
		}
		return &plan{kind: opArray, typ: t, size: t.Size(), elem: elem, n: t.Len(), min: t.Len() * elem.min}, nil
	case reflect.Pointer:
		desc.WriteByte('*')
		elem, err := c.plan(t.Elem(), desc)
		if err != nil {
			return nil, err
		}
		return &plan{kind: opPtr, typ: t, size: t.Size(), elem: elem, min: 1}, nil
	case reflect.Struct:
		p := &plan{kind: opStruct, typ: t, size: t.Size()}
		if err := c.fields(p, t, 0, desc); err != nil {
			return nil, err
		}
		for _, f := range p.fields {
			p.min += f.p.min
		}
		return p, nil
	}
	return nil, &planError{msg: "unsupported kind " + t.Kind().String() + " (type " + t.String() + ")"}
}

// fields appends the leaves of struct t, at offset base in the outermost
// struct, to p: nested structs are flattened in.
func (c *compiler) fields(p *plan, t reflect.Type, base uintptr, desc *strings.Builder) error {
	if c.busy[t] {
		return &planError{msg: "recursive type " + t.String()}
	}
	c.busy[t] = true
	defer delete(c.busy, t)
	desc.WriteByte('{')
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		desc.WriteString(f.Name)
		desc.WriteByte(':')
		if f.Type.Kind() == reflect.Struct && f.Type != timeType {
			if err := c.fields(p, f.Type, base+f.Offset, desc); err != nil {
				return within("."+f.Name, err)
			}
		} else {
			fp, err := c.plan(f.Type, desc)
			if err != nil {
				return within("."+f.Name, err)
			}
			zero0 := fp.kind != opFloat && fp.kind != opArray
			p.fields = append(p.fields, leaf{off: base + f.Offset, p: fp, zero0: zero0})
		}
		desc.WriteByte(';')
	}
	desc.WriteByte('}')
	return nil
}

// scalar returns the plan of a scalar of type t.
func (c *compiler) scalar(k opKind, t reflect.Type, min int) *plan {
	return &plan{kind: k, typ: t, size: t.Size(), min: min}
}

// sliceHeader is the memory layout of every slice.
type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

// encoder appends values to b. Every value of a compiled plan encodes,
// so it has no errors.
type encoder struct {
	b []byte
}

// value appends the value of plan p at ptr.
func (e *encoder) value(p *plan, ptr unsafe.Pointer) {
	switch p.kind {
	case opStruct:
		for i := range p.fields {
			f := &p.fields[i]
			e.value(f.p, unsafe.Add(ptr, f.off))
		}
	case opBool:
		if *(*bool)(ptr) {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
		}
	case opInt:
		var v int64
		switch p.size {
		case 1:
			v = int64(*(*int8)(ptr))
		case 2:
			v = int64(*(*int16)(ptr))
		case 4:
			v = int64(*(*int32)(ptr))
		default:
			v = *(*int64)(ptr)
		}
		e.b = binary.AppendVarint(e.b, v)
	case opUint:
		var v uint64
		switch p.size {
		case 1:
			v = uint64(*(*uint8)(ptr))
		case 2:
			v = uint64(*(*uint16)(ptr))
		case 4:
			v = uint64(*(*uint32)(ptr))
		default:
			v = *(*uint64)(ptr)
		}
		e.b = binary.AppendUvarint(e.b, v)
	case opFloat:
		if p.size == 4 {
			e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(*(*float32)(ptr)))
		} else {
			e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(*(*float64)(ptr)))
		}
	case opString:
		s := *(*string)(ptr)
		e.b = binary.AppendUvarint(e.b, uint64(len(s)))
		e.b = append(e.b, s...)
	case opTime:
		t := (*time.Time)(ptr)
		switch {
		case *t == (time.Time{}):
			e.b = append(e.b, timeZero)
		case t.Location() == time.UTC:
			e.b = append(e.b, timeUTC)
		default:
			_, off := t.Zone()
			e.b = append(e.b, timeOffset)
			e.b = binary.AppendVarint(e.b, int64(off))
		}
		if *t != (time.Time{}) {
			e.b = binary.AppendVarint(e.b, t.Unix())
			e.b = binary.AppendUvarint(e.b, uint64(t.Nanosecond()))
		}
	case opSlice:
		h := (*sliceHeader)(ptr)
		e.b = binary.AppendUvarint(e.b, uint64(h.len))
		for i := range h.len {
			e.value(p.elem, unsafe.Add(h.data, uintptr(i)*p.elem.size))
		}
	case opArray:
		for i := range p.n {
			e.value(p.elem, unsafe.Add(ptr, uintptr(i)*p.elem.size))
		}
	case opPtr:
		q := *(*unsafe.Pointer)(ptr)
		if q == nil {
			e.b = append(e.b, 0)
			return
		}
		e.b = append(e.b, 1)
		e.value(p.elem, q)
	}
}

// decoder reads values into zeroed memory; the strings it decodes point
// into b. After the first error it stops consuming input (err is set, b
// emptied), so that callers check err once per job rather than after
// every field.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{errCorrupt}, args...)...)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	if len(d.b) > 0 && d.b[0] < 0x80 {
		v := d.b[0]
		d.b = d.b[1:]
		return uint64(v)
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		if n == 0 {
			d.fail("truncated")
		} else {
			d.fail("varint overflows 64 bits")
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// count reads a length whose elements encode to at least min bytes each,
// refusing one the input left cannot hold.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	min = max(min, 1) // only a top-level type may encode to nothing
	if n > uint64(len(d.b)/min) {
		if d.err == nil {
			d.fail("length %d with %d bytes left", n, len(d.b))
		}
		return 0
	}
	return int(n)
}

// flag reads a bool or pointer presence byte.
func (d *decoder) flag() bool {
	if len(d.b) == 0 {
		d.fail("truncated")
		return false
	}
	c := d.b[0]
	d.b = d.b[1:]
	if c > 1 {
		d.fail("flag byte %#x", c)
		return false
	}
	return c == 1
}

// value decodes a value of plan p into the zeroed memory at ptr.
func (d *decoder) value(p *plan, ptr unsafe.Pointer) {
	switch p.kind {
	case opStruct:
		for i := range p.fields {
			f := &p.fields[i]
			if f.zero0 && len(d.b) > 0 && d.b[0] == 0 {
				d.b = d.b[1:]
				continue
			}
			d.value(f.p, unsafe.Add(ptr, f.off))
		}
	case opBool:
		*(*bool)(ptr) = d.flag()
	case opInt:
		v := d.varint()
		switch p.size {
		case 1:
			*(*int8)(ptr) = int8(v)
			if int64(int8(v)) != v {
				d.fail("%d overflows int8", v)
			}
		case 2:
			*(*int16)(ptr) = int16(v)
			if int64(int16(v)) != v {
				d.fail("%d overflows int16", v)
			}
		case 4:
			*(*int32)(ptr) = int32(v)
			if int64(int32(v)) != v {
				d.fail("%d overflows int32", v)
			}
		default:
			*(*int64)(ptr) = v
		}
	case opUint:
		v := d.uvarint()
		switch p.size {
		case 1:
			*(*uint8)(ptr) = uint8(v)
			if uint64(uint8(v)) != v {
				d.fail("%d overflows uint8", v)
			}
		case 2:
			*(*uint16)(ptr) = uint16(v)
			if uint64(uint16(v)) != v {
				d.fail("%d overflows uint16", v)
			}
		case 4:
			*(*uint32)(ptr) = uint32(v)
			if uint64(uint32(v)) != v {
				d.fail("%d overflows uint32", v)
			}
		default:
			*(*uint64)(ptr) = v
		}
	case opFloat:
		if len(d.b) < int(p.size) {
			d.fail("truncated")
			return
		}
		if p.size == 4 {
			*(*float32)(ptr) = math.Float32frombits(binary.LittleEndian.Uint32(d.b))
		} else {
			*(*float64)(ptr) = math.Float64frombits(binary.LittleEndian.Uint64(d.b))
		}
		d.b = d.b[p.size:]
	case opString:
		n := d.count(1)
		if n > 0 {
			*(*string)(ptr) = unsafe.String(&d.b[0], n) // see decodeJobs
			d.b = d.b[n:]
		}
	case opTime:
		d.time((*time.Time)(ptr))
	case opSlice:
		n := d.count(p.elem.min)
		if n == 0 {
			return // nil, as gob gave for empty slices too
		}
		data := d.makeSlice(p, n)
		for i := range n {
			d.value(p.elem, unsafe.Add(data, uintptr(i)*p.elem.size))
		}
		// Pointer and lengths written apart: the data pointer through
		// a typed pointer, so that the write barrier sees it.
		h := (*sliceHeader)(ptr)
		h.data = data
		h.len = n
		h.cap = n
	case opArray:
		for i := range p.n {
			d.value(p.elem, unsafe.Add(ptr, uintptr(i)*p.elem.size))
		}
	case opPtr:
		if !d.flag() {
			return
		}
		q := reflect.New(p.elem.typ).UnsafePointer()
		d.value(p.elem, q)
		*(*unsafe.Pointer)(ptr) = q
	}
}

// time decodes a time.Time as the encoder's opTime case wrote it.
func (d *decoder) time(t *time.Time) {
	if len(d.b) == 0 {
		d.fail("truncated")
		return
	}
	tag := d.b[0]
	d.b = d.b[1:]
	var off int64
	switch tag {
	case timeZero:
		return // the zero Time, already in place
	case timeUTC:
	case timeOffset:
		off = d.varint()
		if off != int64(int32(off)) {
			d.fail("zone offset %d", off)
			return
		}
	default:
		d.fail("time tag %#x", tag)
		return
	}
	sec := d.varint()
	nsec := d.uvarint()
	if nsec >= 1e9 {
		d.fail("%d nanoseconds", nsec)
		return
	}
	if d.err != nil {
		return
	}
	tm := time.Unix(sec, int64(nsec))
	switch {
	case tag == timeUTC:
		tm = tm.UTC()
	case zoneOffset(tm) != int(off):
		// Like Time.UnmarshalBinary: the local zone when it has the
		// offset at that instant, else a fixed zone without a name.
		tm = tm.In(time.FixedZone("", int(off)))
	}
	*t = tm
}

func zoneOffset(t time.Time) int {
	_, off := t.Zone()
	return off
}

// makeSlice allocates the zeroed backing array of n elements of slice
// plan p, with the element type's pointer layout so that the collector
// scans it right. Strings and 8-byte integers, the common cases, skip
// reflect: every string type has the layout of string, and integers
// hold no pointers.
func (d *decoder) makeSlice(p *plan, n int) unsafe.Pointer {
	switch {
	case p.elem.kind == opString:
		return unsafe.Pointer(unsafe.SliceData(make([]string, n)))
	case (p.elem.kind == opInt || p.elem.kind == opUint) && p.elem.size == 8:
		return unsafe.Pointer(unsafe.SliceData(make([]uint64, n)))
	}
	return reflect.MakeSlice(p.typ, n, n).UnsafePointer()
}
