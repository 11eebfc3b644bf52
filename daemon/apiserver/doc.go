// Package apiserver serves the daemon's HTTP API safely: bearer tokens
// kept in owner-only files (token.go), the rules of who may read and who
// may change what (guard.go), TLS from certificate and key files renewed
// in place (tls.go), and the listener that refuses to expose an API
// without a token beyond loopback (server.go).
package apiserver
