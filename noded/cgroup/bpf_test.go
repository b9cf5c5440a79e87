package cgroup

import (
	"fmt"
	"testing"
)

// runProgram interprets the subset of eBPF that deviceProgram emits on
// one request, so the assembly's logic is checked without a kernel (the
// real tests load it into one where they can).
func runProgram(t *testing.T, prog []insn, typ, access, major, minor uint32) int {
	t.Helper()
	var r [11]uint64
	ctx := [3]uint32{access<<16 | typ, major, minor}
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.code {
		case opLdxMemW:
			if in.src != 1 || in.off%4 != 0 || in.off < 0 || in.off > 8 {
				t.Fatalf("pc %d: load from r%d%+d", pc, in.src, in.off)
			}
			r[in.dst] = uint64(ctx[in.off/4])
		case opAlu32AndK:
			r[in.dst] = uint64(uint32(r[in.dst]) & uint32(in.imm))
		case opAlu32RshK:
			r[in.dst] = uint64(uint32(r[in.dst]) >> uint32(in.imm))
		case opAlu32MovX:
			r[in.dst] = uint64(uint32(r[in.src]))
		case opAlu64MovK:
			r[in.dst] = uint64(int64(in.imm))
		case opJneK:
			if r[in.dst] != uint64(uint32(in.imm)) {
				pc += int(in.off)
			}
		case opJeqK:
			if r[in.dst] == uint64(uint32(in.imm)) {
				pc += int(in.off)
			}
		case opExit:
			return int(r[0])
		default:
			t.Fatalf("pc %d: opcode %#x", pc, in.code)
		}
		if pc+1 > len(prog) {
			t.Fatalf("jump past the end at pc %d", pc)
		}
	}
	t.Fatal("fell off the end")
	return -1
}

const (
	accMknod = 1
	accRead  = 2
	accWrite = 4
)

func TestDeviceProgram(t *testing.T) {
	allow := &DeviceFence{Policy: AllowListed, Devices: append(BaseDevices(),
		Device{Type: "c", Major: 195, Minor: 0},
		Device{Type: "b", Major: 8, Minor: Any, Access: "r"})}
	deny := &DeviceFence{Policy: DenyListed, Devices: []Device{
		{Type: "c", Major: 195, Minor: 1}, {Type: "c", Major: 10, Minor: 229, Access: "w"}}}
	tests := []struct {
		name               string
		fence              *DeviceFence
		typ, acc, maj, mnr uint32
		want               int
	}{
		{name: "allow-listed null", fence: allow, typ: bpfDevcgDevChar, acc: accRead | accWrite, maj: 1, mnr: 3, want: 1},
		{name: "allow-listed own GPU", fence: allow, typ: bpfDevcgDevChar, acc: accRead, maj: 195, mnr: 0, want: 1},
		{name: "allow-listed other GPU", fence: allow, typ: bpfDevcgDevChar, acc: accRead, maj: 195, mnr: 1, want: 0},
		{name: "allow-listed pts wildcard", fence: allow, typ: bpfDevcgDevChar, acc: accRead | accWrite, maj: 136, mnr: 7, want: 1},
		{name: "allow-listed block read", fence: allow, typ: bpfDevcgDevBlock, acc: accRead, maj: 8, mnr: 1, want: 1},
		{name: "allow-listed block write beyond access", fence: allow, typ: bpfDevcgDevBlock, acc: accRead | accWrite, maj: 8, mnr: 1, want: 0},
		{name: "allow-listed type matters", fence: allow, typ: bpfDevcgDevBlock, acc: accRead, maj: 1, mnr: 3, want: 0},
		{name: "allow-listed mknod of null", fence: allow, typ: bpfDevcgDevChar, acc: accMknod, maj: 1, mnr: 3, want: 1},
		{name: "deny-listed other GPU", fence: deny, typ: bpfDevcgDevChar, acc: accRead, maj: 195, mnr: 1, want: 0},
		{name: "deny-listed own GPU", fence: deny, typ: bpfDevcgDevChar, acc: accRead | accWrite, maj: 195, mnr: 0, want: 1},
		{name: "deny-listed anything else", fence: deny, typ: bpfDevcgDevBlock, acc: accWrite, maj: 8, mnr: 0, want: 1},
		{name: "deny-listed write of fuse", fence: deny, typ: bpfDevcgDevChar, acc: accRead | accWrite, maj: 10, mnr: 229, want: 0},
		{name: "deny-listed read of fuse", fence: deny, typ: bpfDevcgDevChar, acc: accRead, maj: 10, mnr: 229, want: 1},
		{name: "empty allow list", fence: &DeviceFence{Policy: AllowListed}, typ: bpfDevcgDevChar, acc: accRead, maj: 1, mnr: 3, want: 0},
		{name: "deny all", fence: &DeviceFence{Policy: DenyListed, Devices: []Device{{Type: "a"}}}, typ: bpfDevcgDevChar, acc: accRead, maj: 1, mnr: 3, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runProgram(t, deviceProgram(tt.fence), tt.typ, tt.acc, tt.maj, tt.mnr)
			if got != tt.want {
				t.Errorf("verdict %d, want %d for %d %d:%d access %d\n%s", got, tt.want, tt.typ, tt.maj, tt.mnr, tt.acc, dump(deviceProgram(tt.fence)))
			}
		})
	}
}

func dump(prog []insn) string {
	s := ""
	for i, in := range prog {
		s += fmt.Sprintf("%3d: %#02x r%d r%d off %d imm %d\n", i, in.code, in.dst, in.src, in.off, in.imm)
	}
	return s
}

func TestEncode(t *testing.T) {
	got := encode([]insn{{code: opLdxMemW, dst: 2, src: 1, off: 4}, {code: opJneK, dst: 4, off: 3, imm: 195}, {code: opAlu64MovK, imm: -1}})
	want := []byte{
		0x61, 0x12, 4, 0, 0, 0, 0, 0,
		0x55, 0x04, 3, 0, 195, 0, 0, 0,
		0xb7, 0x00, 0, 0, 0xff, 0xff, 0xff, 0xff,
	}
	if string(got) != string(want) {
		t.Errorf("encode = % x\nwant     % x", got, want)
	}
}
