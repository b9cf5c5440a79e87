package munge

import (
	"context"
	"testing"

	"github.com/tide-hpc/tide/internal/munge/mungetest"
)

// The benchmarks run against a private munged (skipped without one):
// what a CLI request (Encode) and the controller (Decode) pay per
// credential, socket round trip included.

func BenchmarkEncode(b *testing.B) {
	d := mungetest.Start(b)
	ctx := context.Background()
	if _, err := Encode(ctx, d.Socket, nil); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Encode(ctx, d.Socket, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	d := mungetest.Start(b)
	ctx := context.Background()
	// A credential decodes once, so each iteration needs its own, made
	// before the clock starts.
	creds := make([]string, b.N)
	for i := range creds {
		c, err := Encode(ctx, d.Socket, nil)
		if err != nil {
			b.Fatal(err)
		}
		creds[i] = c
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Decode(ctx, d.Socket, creds[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeDecode is one authenticated request's cost when client
// and controller share a host.
func BenchmarkEncodeDecode(b *testing.B) {
	d := mungetest.Start(b)
	ctx := context.Background()
	for b.Loop() {
		c, err := Encode(ctx, d.Socket, []byte("payload"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(ctx, d.Socket, c); err != nil {
			b.Fatal(err)
		}
	}
}
