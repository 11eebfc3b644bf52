package apiserver

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tokenBytes is the entropy of a created token: 256 bits.
const tokenBytes = 32

// MinTokenLen is the shortest token a file may hold.
const MinTokenLen = 16

// NewToken returns a fresh random token: 32 bytes from crypto/rand,
// base64url without padding (43 characters).
func NewToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// CreateTokenFile writes a new token to path, readable by its owner only
// (0600), creating its directory (0700) if need be. It refuses to
// overwrite a file (fs.ErrExist): a token in use would stop working. The
// file appears whole or not at all (written aside, then linked into
// place), so daemons sharing one path never read half a token.
func CreateTokenFile(path string) (string, error) {
	tok, err := NewToken()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("api token %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, ".api-token-*")
	if err != nil {
		return "", fmt.Errorf("api token %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil { // CreateTemp made it 0600
		err = os.Link(f.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("api token %s: %w", path, err)
	}
	return tok, nil
}

// LoadTokenFile reads the token in path. Nobody but its owner may write
// it and nobody outside its group read it: 0600, or 0640/0440 for a file
// shared through a group, as a Kubernetes Secret mounted with an fsGroup
// is (PostgreSQL's rule for its key). It holds one token of
// MinTokenLen or more printable ASCII characters without spaces,
// optionally followed by a newline.
func LoadTokenFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("api token %s: not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o037 != 0 {
		return "", fmt.Errorf("api token %s has mode %v: others can read or change it; it must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	if st.Size() > 4096 {
		return "", fmt.Errorf("api token %s: %d bytes; a token file holds one token", path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	tok, err := ParseToken(string(b))
	if err != nil {
		return "", fmt.Errorf("api token %s: %w", path, err)
	}
	return tok, nil
}

// ParseToken checks a token file's contents and returns the token.
func ParseToken(s string) (string, error) {
	tok := strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
	if len(tok) < MinTokenLen {
		return "", fmt.Errorf("the token is %d characters long; want %d or more (gossipd token --out FILE makes one)", len(tok), MinTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c > '~' {
			return "", fmt.Errorf("character %d of the token is %q; a token is printable ASCII without spaces on one line", i+1, rune(c))
		}
	}
	return tok, nil
}

// LoadOrCreateTokenFile reads the token in path, or creates the file with
// a new token if there is none; created says which.
func LoadOrCreateTokenFile(path string) (tok string, created bool, err error) {
	tok, err = LoadTokenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		tok, err = CreateTokenFile(path)
		if err == nil {
			return tok, true, nil
		}
		if errors.Is(err, fs.ErrExist) { // another daemon created it first
			tok, err = LoadTokenFile(path)
		}
	}
	return tok, false, err
}
