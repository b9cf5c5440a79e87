package munge

import (
	"errors"
	"fmt"
	"strings"
)

// Classes of failure, matched with errors.Is. The first four say that
// munged refused the credential; the last two that munged could not be
// asked.
var (
	// ErrReplayed: the credential was decoded before (munged remembers
	// every credential it decoded until it expires).
	ErrReplayed = errors.New("munge: credential replayed")
	// ErrExpired: the credential is older than its time-to-live.
	ErrExpired = errors.New("munge: credential expired")
	// ErrRewound: the credential was made in the future, as seen by this
	// host's clock (the clocks of the two hosts disagree).
	ErrRewound = errors.New("munge: credential rewound (encoded in the future)")
	// ErrInvalid: not a credential munged can accept: malformed, made
	// with another key, with a cipher, MAC, compression or realm this
	// munged does not know, or restricted to another user.
	ErrInvalid = errors.New("munge: invalid credential")
	// ErrUnreachable: munged could not be reached, or did not answer
	// before the deadline.
	ErrUnreachable = errors.New("munge: munged unreachable")
	// ErrProtocol: what answered on munged's socket broke munged's
	// protocol (not munged, or a version this client does not speak).
	ErrProtocol = errors.New("munge: malformed reply from munged")
)

// Code is munged's error number (munge_err_t in munge.h).
type Code uint8

// munged's error numbers.
const (
	CodeSuccess      Code = 0
	CodeSnafu        Code = 1 // internal error
	CodeBadArg       Code = 2
	CodeBadLength    Code = 3 // message or payload too long
	CodeOverflow     Code = 4
	CodeNoMemory     Code = 5
	CodeSocket       Code = 6
	CodeTimeout      Code = 7
	CodeBadCred      Code = 8 // not a credential
	CodeBadVersion   Code = 9
	CodeBadCipher    Code = 10
	CodeBadMAC       Code = 11
	CodeBadZip       Code = 12
	CodeBadRealm     Code = 13
	CodeInvalid      Code = 14 // MAC mismatch: another key, or tampered
	CodeExpired      Code = 15
	CodeRewound      Code = 16
	CodeReplayed     Code = 17
	CodeUnauthorized Code = 18 // restricted to another uid or gid
)

var codeNames = [...]string{
	CodeSuccess:      "Success",
	CodeSnafu:        "Internal error",
	CodeBadArg:       "Invalid argument",
	CodeBadLength:    "Exceeded maximum message length",
	CodeOverflow:     "Buffer overflow",
	CodeNoMemory:     "Out of memory",
	CodeSocket:       "Socket communication error",
	CodeTimeout:      "Socket timeout",
	CodeBadCred:      "Invalid credential format",
	CodeBadVersion:   "Invalid credential version",
	CodeBadCipher:    "Invalid cipher type",
	CodeBadMAC:       "Invalid MAC type",
	CodeBadZip:       "Invalid compression type",
	CodeBadRealm:     "Unrecognized security realm",
	CodeInvalid:      "Invalid credential",
	CodeExpired:      "Expired credential",
	CodeRewound:      "Rewound credential",
	CodeReplayed:     "Replayed credential",
	CodeUnauthorized: "Unauthorized credential",
}

// String is munge_strerror's text for c.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("munge error %d", uint8(c))
}

// Error is a refusal munged sent back for an encode or decode request.
// errors.Is matches it against the class of its Code (ErrReplayed,
// ErrExpired, ErrRewound, ErrInvalid); other codes are munged's own
// trouble and match none.
type Error struct {
	Op      string // "encode" or "decode"
	Code    Code
	Message string // munged's message, when it differs from Code's text
}

func (e *Error) Error() string {
	msg := e.Code.String()
	if e.Message != "" && e.Message != msg {
		msg = e.Message + " (" + msg + ")"
	}
	return "munge: " + e.Op + ": " + msg
}

// Is matches e against the class of its code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrReplayed:
		return e.Code == CodeReplayed
	case ErrExpired:
		return e.Code == CodeExpired
	case ErrRewound:
		return e.Code == CodeRewound
	case ErrInvalid:
		switch e.Code {
		case CodeBadCred, CodeBadVersion, CodeBadCipher, CodeBadMAC, CodeBadZip,
			CodeBadRealm, CodeInvalid, CodeUnauthorized:
			return true
		}
	}
	return false
}

// printable keeps a message from the socket safe to log and to print: at
// most 255 bytes arrive, and control bytes become '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '\uFFFD' {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// classedError is an error of one of the classes above, with its own
// message and the cause below it.
type classedError struct {
	msg   string
	class error
	cause error
}

// classed returns an error saying msg (and cause, when not nil) that
// errors.Is matches against class and against cause.
func classed(msg string, class, cause error) error {
	return &classedError{msg: msg, class: class, cause: cause}
}

func (e *classedError) Error() string {
	if e.cause == nil {
		return e.msg
	}
	return e.msg + ": " + e.cause.Error()
}

func (e *classedError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.class}
	}
	return []error{e.class, e.cause}
}
