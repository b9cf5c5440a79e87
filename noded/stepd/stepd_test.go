package stepd

import (
	"errors"
	"syscall"
	"testing"
)

func TestStrerror(t *testing.T) {
	tests := []struct {
		name string
		in   error
		want string
	}{
		{name: "errno", in: syscall.ENOENT, want: "No such file or directory"},
		{name: "already capital", in: errors.New("EOF"), want: "EOF"},
		{name: "empty", in: errors.New(""), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strerror(tt.in); got != tt.want {
				t.Errorf("strerror = %q, want %q", got, tt.want)
			}
		})
	}
}
