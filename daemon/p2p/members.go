package p2p

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrMember marks a consortium member, as given to ReadMembers or
// AddMembers, that is no peer ID.
var ErrMember = errors.New("p2p: consortium member is no peer ID")

// memberError is an error about a member given, which matches ErrMember
// and reads as err.
type memberError struct{ err error }

func (e memberError) Error() string        { return e.err.Error() }
func (e memberError) Unwrap() error        { return e.err }
func (e memberError) Is(target error) bool { return target == ErrMember }

// ReadMembers reads consortium members as a command line gives them: peer
// IDs, kept as they are for Add to check, or @FILE naming a file that
// holds one (a bare ID, or an address ending in /p2p/ID, as `gossipd
// keygen --addr-out` writes it). A file whose ID is none is an error
// matching ErrMember.
func ReadMembers(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		path, ok := strings.CutPrefix(a, "@")
		if !ok {
			out = append(out, a)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("consortium member %s: %w", a, err)
		}
		s := strings.TrimSpace(string(b))
		if i := strings.LastIndex(s, "/p2p/"); i >= 0 {
			s = s[i+len("/p2p/"):]
		}
		if err := CheckPeerID(s); err != nil {
			return nil, memberError{fmt.Errorf("consortium member %s: %v", a, err)}
		}
		out = append(out, s)
	}
	return out, nil
}

// AddMembers admits ids to the consortium file at path, rewriting it,
// and returns the consortium; an id that is no peer ID is an error
// matching ErrMember, and the file is left as it was.
func AddMembers(path string, ids ...string) (*Consortium, error) {
	c, err := LoadConsortium(path)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := c.Add(id); err != nil {
			return nil, memberError{err}
		}
	}
	if err := c.Save(path); err != nil {
		return nil, err
	}
	return c, nil
}

// InitConsortium writes a new consortium file at path with a fresh key
// and the members ids, refusing to overwrite one; with keep, an existing
// file keeps its key and gains the members instead (AddMembers), and
// created is false. A member that is no peer ID is an error matching
// ErrMember.
func InitConsortium(path string, keep bool, ids ...string) (c *Consortium, created bool, err error) {
	if _, err := os.Stat(path); keep && err == nil {
		c, err := AddMembers(path, ids...)
		return c, false, err
	}
	if c, err = NewConsortium(ids...); err != nil {
		return nil, false, memberError{err}
	}
	if err := c.SaveNew(path); err != nil {
		return nil, false, err
	}
	return c, true, nil
}
