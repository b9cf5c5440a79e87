package api

import (
	"errors"
	"fmt"
)

// Error classes, after containerd's errdefs. Wrap them with fmt.Errorf and
// %w to add context; test with errors.Is. They map to HTTP status codes in
// HTTPStatus and back in FromStatus, and to CLI exit codes in cli.
var (
	ErrNotFound         = errors.New("not found")
	ErrInvalidArgument  = errors.New("invalid argument")
	ErrPermissionDenied = errors.New("permission denied")
	ErrUnauthenticated  = errors.New("unauthenticated")
	ErrConflict         = errors.New("conflict")
	ErrUnavailable      = errors.New("unavailable")
	ErrInternal         = errors.New("internal error")
	// ErrTooManyRequests: the submission buffer is full; the answer's
	// Retry-After header says when to try again.
	ErrTooManyRequests = errors.New("too many requests")
)

// classes maps each class to its wire word and HTTP status. The numbers
// are written out so that this package does not link net/http into
// binaries that never speak HTTP (the job supervisor).
var classes = []struct {
	err    error
	code   string
	status int
}{
	{ErrNotFound, "not_found", 404},
	{ErrInvalidArgument, "invalid_argument", 400},
	{ErrPermissionDenied, "permission_denied", 403},
	{ErrUnauthenticated, "unauthenticated", 401},
	{ErrConflict, "conflict", 409},
	{ErrUnavailable, "unavailable", 503},
	{ErrInternal, "internal", 500},
	{ErrTooManyRequests, "too_many_requests", 429},
}

// ErrorBody is the JSON body of every non-2xx answer.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// HTTPStatus returns the status code and class word for err.
func HTTPStatus(err error) (int, string) {
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.status, c.code
		}
	}
	return 500, "internal"
}

// NewErrorBody wraps err for the wire.
func NewErrorBody(err error) (int, ErrorBody) {
	status, code := HTTPStatus(err)
	var b ErrorBody
	b.Error.Code = code
	b.Error.Message = err.Error()
	return status, b
}

// classError carries a message meant for users verbatim while still
// matching its class with errors.Is.
type classError struct {
	class error
	msg   string
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

// Errorf returns an error of the given class whose text is only the
// formatted message (no ": invalid argument" suffix), for errors shown to
// users as they are.
func Errorf(class error, format string, args ...any) error {
	return &classError{class: class, msg: fmt.Sprintf(format, args...)}
}

// FromBody turns a decoded error body back into an error of the same class.
func FromBody(status int, b ErrorBody) error {
	for _, c := range classes {
		if c.code == b.Error.Code {
			return &classError{class: c.err, msg: b.Error.Message}
		}
	}
	msg := b.Error.Message
	if msg == "" {
		msg = fmt.Sprintf("controller answered HTTP %d", status)
	}
	return &classError{class: ErrInternal, msg: msg}
}

// Invalid is shorthand for Errorf(ErrInvalidArgument, ...).
func Invalid(format string, args ...any) error {
	return Errorf(ErrInvalidArgument, format, args...)
}
