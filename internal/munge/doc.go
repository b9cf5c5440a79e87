// Package munge is a client of munged, the MUNGE authentication daemon,
// written in Go without cgo so that the static CLI can use it.
//
// Encode asks the local munged for a credential that names the calling
// process's uid and gid (munged learns them from the socket with
// SO_PEERCRED, never from the request); Decode asks the local munged to
// check a credential made on any host that shares the same munge.key and
// returns who made it. munged itself refuses credentials that are
// expired, rewound (made in the future), replayed (decoded before) or
// not made with its key; those refusals come back as errors that
// errors.Is matches against ErrExpired, ErrRewound, ErrReplayed and
// ErrInvalid. A munged that cannot be reached or that does not answer in
// time gives ErrUnreachable, and a reply that breaks the protocol gives
// ErrProtocol.
//
// munged remembers the credentials it decoded in memory, until they
// expire: a credential is refused as replayed only by the munged that
// decoded it before, not by another host's, nor by the same one after a
// restart. A service that relies on replay refusal decodes with one
// munged, and a credential's time-to-live (munged's default: 5 minutes)
// bounds what a restart exposes.
//
// The protocol is munged's own (message format version 4, the same since
// MUNGE 0.5): one request and one reply per unix-socket connection, each
// an 11-byte header — magic 0x00606D4B, version, message type, retry
// count, body length, all big-endian — followed by the body. Only the
// default options are used: the daemon's default cipher, MAC,
// compression and time-to-live, no realm, and no restriction on who may
// decode. Every read from the socket is bounded in size and by the
// context's deadline (DefaultTimeout when it has none), so a broken or
// hostile peer can neither exhaust memory nor hang the caller.
package munge
