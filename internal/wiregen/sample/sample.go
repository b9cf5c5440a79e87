// Package sample holds a struct with every kind, tag option and layout
// internal/wiregen handles, and its generated codec: its test holds the
// codec to encoding/json on random values and odd input, for the kinds
// and combinations Tide's own wire types do not use yet.
package sample

import "time"

//go:generate go run ../cmd/wiregen -out sample_gen.go -encode All,Empty -decode All:whole,Strict:strict,Empty:stream

// Defined types over the basic kinds.
type (
	Name  string
	Flag  bool
	Small int16
	Level uint8
	Ratio float64
)

// Inner is a nested struct.
type Inner struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
}

// Base is embedded in All, its fields flattened in.
type Base struct {
	ID   uint64 `json:"id"`
	Note string `json:"note,omitempty"`
}

// Tail is embedded last, its first field omitted when empty.
type Tail struct {
	Extra []int `json:"extra,omitempty"`
	Last  bool  `json:"last"`
}

// All has a field of every kind, with and without omitempty and
// omitzero.
type All struct {
	Plain      string // no tag: the Go name is the key
	Base       `json:"-"`
	Embedded   Base
	Name       Name                `json:"name"`
	NameOmit   Name                `json:"name_omit,omitempty"`
	Flag       Flag                `json:"flag"`
	FlagOmit   bool                `json:"flag_omit,omitempty"`
	Int8       int8                `json:"int8"`
	Small      Small               `json:"small,omitempty"`
	Int32      int32               `json:"int32,omitzero"`
	Int        int                 `json:"int"`
	Int64      int64               `json:"int64"`
	Uint       uint                `json:"uint"`
	Uint16     uint16              `json:"uint16,omitzero"`
	Uint32     uint32              `json:"uint32"`
	Uint64     uint64              `json:"uint64,omitempty"`
	Level      Level               `json:"level"`
	Float      float64             `json:"float"`
	Ratio      Ratio               `json:"ratio,omitempty"`
	When       time.Time           `json:"when"`
	WhenOmit   time.Time           `json:"when_omit,omitzero"`
	WhenEmpty  time.Time           `json:"when_empty,omitempty"` // never omitted: a struct
	PtrInt     *int                `json:"ptr_int"`
	PtrName    *Name               `json:"ptr_name,omitempty"`
	PtrTime    *time.Time          `json:"ptr_time,omitzero"`
	PtrInner   *Inner              `json:"ptr_inner"`
	PtrPtr     **Inner             `json:"ptr_ptr,omitempty"`
	Inner      Inner               `json:"inner"`
	InnerOmit  Inner               `json:"inner_omit,omitempty"` // never omitted: a struct
	Strings    []string            `json:"strings"`
	Names      []Name              `json:"names,omitempty"`
	Smalls     []Small             `json:"smalls"`
	Uints      []uint32            `json:"uints,omitempty"`
	Ints       []int               `json:"ints,omitempty"`
	Inners     []Inner             `json:"inners"`
	InnerPtrs  []*Inner            `json:"inner_ptrs,omitempty"`
	Nested     [][]int             `json:"nested"`
	Floats     []float64           `json:"floats,omitzero"`
	Times      []time.Time         `json:"times,omitempty"`
	Both       []string            `json:"both,omitempty,omitzero"`
	ByName     map[string]int      `json:"by_name"`
	ByNameOmit map[Name]Inner      `json:"by_name_omit,omitempty"`
	ByInt      map[int64]string    `json:"by_int,omitempty"`
	BySmall    map[Small]bool      `json:"by_small,omitzero"`
	ByUint     map[uint32][]string `json:"by_uint"`
	Tail
	unexported int
	Ignored    int `json:"-"`
	Dash       int `json:"-,"`
}

// Strict is decoded as a request body is (unknown fields refused), with
// a map of structs whose unknown fields must reach encoding/json.
type Strict struct {
	Name  string           `json:"name"`
	Inner Inner            `json:"inner"`
	Map   map[string]Inner `json:"map,omitempty"`
}

// Empty has no fields.
type Empty struct{}
