package clitest

import "bytes"

// Buffers are a test factory's stream buffers.
type Buffers struct {
	In, Out, Err *bytes.Buffer
}
