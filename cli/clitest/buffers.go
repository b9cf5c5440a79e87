package clitest

import "bytes"

// cmdutilBuffers are a test factory's stream buffers.
type cmdutilBuffers struct {
	In, Out, Err *bytes.Buffer
}

// Buffers is the exported name of a test factory's stream buffers.
type Buffers = cmdutilBuffers
