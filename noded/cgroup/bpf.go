package cgroup

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Device control on cgroup v2 is an eBPF program of type
// BPF_PROG_TYPE_CGROUP_DEVICE attached to the cgroup: the kernel runs it
// on every open or mknod of a device node and denies access when it
// returns 0. The program is small and fixed in shape, so it is assembled
// here by hand (as runc's devicefilter does with a library): load the
// request's type, access, major and minor, then one block per rule that
// returns the rule's verdict when the request matches, then the
// policy's default.

// Kernel ABI constants (include/uapi/linux/bpf.h).
const (
	bpfProgLoad             = 5
	bpfProgAttach           = 8
	bpfProgTypeCgroupDevice = 15
	bpfCgroupDevice         = 6 // attach type

	bpfDevcgDevBlock = 1
	bpfDevcgDevChar  = 2

	// Instruction opcodes.
	opLdxMemW   = 0x61 // dst = *(u32 *)(src + off)
	opAlu32AndK = 0x54 // dst &= imm (32 bit)
	opAlu32RshK = 0x74 // dst >>= imm (32 bit)
	opAlu32MovX = 0xbc // dst = src (32 bit)
	opAlu64MovK = 0xb7 // dst = imm
	opJneK      = 0x55 // if dst != imm goto pc+off
	opJeqK      = 0x15 // if dst == imm goto pc+off
	opExit      = 0x95
)

// insn is one eBPF instruction.
type insn struct {
	code     uint8
	dst, src uint8
	off      int16
	imm      int32
}

// deviceProgram assembles f into eBPF instructions. Registers after the
// prologue: r2 type, r3 access bits, r4 major, r5 minor (struct
// bpf_cgroup_dev_ctx is {u32 access_type; u32 major; u32 minor}, with
// access in the high and type in the low 16 bits of access_type).
func deviceProgram(f *DeviceFence) []insn {
	prog := []insn{
		{code: opLdxMemW, dst: 2, src: 1, off: 0},
		{code: opAlu32AndK, dst: 2, imm: 0xffff},
		{code: opLdxMemW, dst: 3, src: 1, off: 0},
		{code: opAlu32RshK, dst: 3, imm: 16},
		{code: opLdxMemW, dst: 4, src: 1, off: 4},
		{code: opLdxMemW, dst: 5, src: 1, off: 8},
	}
	listed, other := int32(1), int32(0)
	if f.Policy == DenyListed {
		listed, other = 0, 1
	}
	for _, d := range f.Devices {
		// Each jump to the next rule is fixed up once the block is
		// complete: skip marks it.
		var block []insn
		skip := func(code uint8, dst uint8, imm int32) {
			block = append(block, insn{code: code, dst: dst, imm: imm, off: -1})
		}
		switch d.Type {
		case "c":
			skip(opJneK, 2, bpfDevcgDevChar)
		case "b":
			skip(opJneK, 2, bpfDevcgDevBlock)
		}
		if bits := d.accessBits(); bits != 7 {
			block = append(block, insn{code: opAlu32MovX, dst: 1, src: 3})
			if f.Policy == DenyListed {
				// Denied when the request wants any of the rule's access.
				block = append(block, insn{code: opAlu32AndK, dst: 1, imm: bits})
				skip(opJeqK, 1, 0)
			} else {
				// Allowed when it wants nothing beyond the rule's access.
				block = append(block, insn{code: opAlu32AndK, dst: 1, imm: ^bits & 7})
				skip(opJneK, 1, 0)
			}
		}
		if d.Type != "a" && d.Major != Any {
			skip(opJneK, 4, int32(uint32(d.Major)))
		}
		if d.Type != "a" && d.Minor != Any {
			skip(opJneK, 5, int32(uint32(d.Minor)))
		}
		block = append(block, insn{code: opAlu64MovK, dst: 0, imm: listed}, insn{code: opExit})
		for i := range block {
			if block[i].off == -1 {
				block[i].off = int16(len(block) - i - 1)
			}
		}
		prog = append(prog, block...)
	}
	return append(prog, insn{code: opAlu64MovK, dst: 0, imm: other}, insn{code: opExit})
}

// encode lays the instructions out as the kernel reads them.
func encode(prog []insn) []byte {
	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		var b [8]byte
		b[0] = in.code
		b[1] = in.dst&0xf | in.src<<4
		binary.LittleEndian.PutUint16(b[2:], uint16(in.off))
		binary.LittleEndian.PutUint32(b[4:], uint32(in.imm))
		out = append(out, b[:]...)
	}
	return out
}

// attachDeviceProgram loads f as a device program and attaches it to
// the v2 cgroup, replacing one attached before.
func (c *Cgroup) attachDeviceProgram(f *DeviceFence) error {
	if err := f.valid(); err != nil {
		return err
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return fmt.Errorf("v2 device fence: eBPF assembly supports little-endian machines only")
	}
	fd, err := loadDeviceProgram(encode(deviceProgram(f)))
	if err != nil {
		return fmt.Errorf("v2 device fence: %w", err)
	}
	defer syscall.Close(int(fd))
	dir, err := os.Open(c.dirs[""])
	if err != nil {
		return fmt.Errorf("v2 device fence: %w", err)
	}
	defer dir.Close()
	// union bpf_attr, BPF_PROG_ATTACH part: target_fd, attach_bpf_fd,
	// attach_type, attach_flags (0: this program replaces any other).
	var attach [20]byte
	le := binary.LittleEndian
	le.PutUint32(attach[0:], uint32(dir.Fd()))
	le.PutUint32(attach[4:], uint32(fd))
	le.PutUint32(attach[8:], bpfCgroupDevice)
	if _, _, errno := syscall.Syscall(unix.SYS_BPF, bpfProgAttach, uintptr(unsafe.Pointer(&attach[0])), unsafe.Sizeof(attach)); errno != 0 {
		return fmt.Errorf("v2 device fence: attach eBPF program to %s: %w", c.Rel, errno)
	}
	return nil
}

// loadDeviceProgram loads code as a cgroup device program and returns
// its descriptor. A refused program is loaded again with the verifier's
// log, which then explains the refusal.
func loadDeviceProgram(code []byte) (uintptr, error) {
	license := []byte("Apache-2.0\x00")
	try := func(logBuf []byte) (uintptr, syscall.Errno) {
		// union bpf_attr, BPF_PROG_LOAD part.
		var load [72]byte
		le := binary.LittleEndian
		le.PutUint32(load[0:], bpfProgTypeCgroupDevice)
		le.PutUint32(load[4:], uint32(len(code)/8))
		le.PutUint64(load[8:], uint64(uintptr(unsafe.Pointer(&code[0]))))
		le.PutUint64(load[16:], uint64(uintptr(unsafe.Pointer(&license[0]))))
		if logBuf != nil {
			le.PutUint32(load[24:], 1) // log_level
			le.PutUint32(load[28:], uint32(len(logBuf)))
			le.PutUint64(load[32:], uint64(uintptr(unsafe.Pointer(&logBuf[0]))))
		}
		copy(load[48:64], "tide_devices")
		fd, _, errno := syscall.Syscall(unix.SYS_BPF, bpfProgLoad, uintptr(unsafe.Pointer(&load[0])), unsafe.Sizeof(load))
		runtime.KeepAlive(code)
		runtime.KeepAlive(license)
		runtime.KeepAlive(logBuf)
		return fd, errno
	}
	fd, errno := try(nil)
	if errno == 0 {
		return fd, nil
	}
	logBuf := make([]byte, 64<<10)
	if fd, again := try(logBuf); again == 0 {
		return fd, nil // refused once, accepted now: take it
	}
	return 0, fmt.Errorf("load eBPF program: %w: %s", errno, logBuf[:clen(logBuf)])
}

// clen is the length of a NUL-terminated string in b.
func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}
