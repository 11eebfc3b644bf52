package p2p

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"gopkg.in/yaml.v3"
)

// A consortium is a private gossipd network: its members share a 256-bit
// key (libp2p's private networks, PSK: a peer without it cannot complete a
// connection at all) and list each other's peer IDs (a connection gater
// refuses every other peer, even one holding the key). Private networks run
// over TCP only: libp2p's QUIC does not support them.

// Consortium is a consortium file: the network key and the members.
type Consortium struct {
	// PSK is the 32-byte pre-shared network key, hex in the file.
	PSK []byte `yaml:"-"`
	// Members are the admitted peer IDs, sorted.
	Members []string `yaml:"members"`
	// Path is the file it was read from (empty: made in memory), for
	// messages.
	Path string `yaml:"-"`
}

// ErrNotMember means this node's own consortium file does not list it.
var ErrNotMember = errors.New("p2p: not a member of the consortium")

// checkMember returns an error wrapping ErrNotMember, naming the file and
// the node's peer ID, unless the consortium lists self.
func (c *Consortium) checkMember(self peer.ID) error {
	if c.Admits(self) {
		return nil
	}
	file, add := "its consortium", "gossipd consortium add-member --file FILE "+self.String()
	if c.Path != "" {
		file, add = "the consortium file "+c.Path, "gossipd consortium add-member --file "+c.Path+" "+self.String()
	}
	return fmt.Errorf("%w: %s does not list this node (peer ID %s) among its %d members, so every member would refuse it; "+
		"ask an admin to add it (%s) and to give every member the updated file", ErrNotMember, file, self, len(c.Members), add)
}

type consortiumFile struct {
	PSK     string   `yaml:"psk"`
	Members []string `yaml:"members"`
}

// NewConsortium returns a consortium with a fresh key from crypto/rand.
func NewConsortium(members ...string) (*Consortium, error) {
	c := &Consortium{PSK: make([]byte, 32)}
	if _, err := rand.Read(c.PSK); err != nil {
		return nil, err
	}
	for _, m := range members {
		if err := c.Add(m); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Add admits a peer ID.
func (c *Consortium) Add(id string) error {
	if err := CheckPeerID(id); err != nil {
		return fmt.Errorf("p2p: consortium member: %w", err)
	}
	if i, found := slices.BinarySearch(c.Members, id); !found {
		c.Members = slices.Insert(c.Members, i, id)
	}
	return nil
}

// Admits reports whether p is a member.
func (c *Consortium) Admits(p peer.ID) bool {
	_, ok := slices.BinarySearch(c.Members, p.String())
	return ok
}

// LoadConsortium reads a consortium file. Like an identity key it holds a
// secret: a file others can read is refused.
func LoadConsortium(path string) (*Consortium, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("p2p: consortium: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("p2p: consortium file %s has mode %v; it holds the network key and must be readable by its owner only (chmod 600)", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("p2p: consortium: %w", err)
	}
	return ParseConsortium(b, path)
}

// ParseConsortium decodes a consortium file's contents; name (the file's
// path) is for error messages.
func ParseConsortium(b []byte, name string) (*Consortium, error) {
	var f consortiumFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true) // a misspelt "members" would admit nobody, silently
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("p2p: consortium file %s: %w", name, err)
	}
	psk, err := hex.DecodeString(strings.TrimSpace(f.PSK))
	if err != nil || len(psk) != 32 {
		return nil, fmt.Errorf("p2p: consortium file %s: psk must be 64 hex digits (32 bytes)", name)
	}
	c := &Consortium{PSK: psk, Path: name}
	for i, m := range f.Members {
		if err := c.Add(m); err != nil {
			return nil, fmt.Errorf("p2p: consortium file %s: member %d: %w", name, i+1, err)
		}
	}
	return c, nil
}

// Save writes the consortium file with mode 0600, replacing it.
func (c *Consortium) Save(path string) error {
	b, err := yaml.Marshal(consortiumFile{PSK: hex.EncodeToString(c.PSK), Members: c.Members})
	if err != nil {
		return err
	}
	b = append([]byte("# gossipd consortium: the private network key (secret: share it only with\n# members) and the peer IDs admitted. gossipd consortium add-member adds one.\n"), b...)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SaveNew writes the file, refusing to overwrite one.
func (c *Consortium) SaveNew(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("p2p: %s exists; refusing to overwrite a consortium key", path)
	}
	return c.Save(path)
}

// memberGater is a connmgr.ConnectionGater that admits members only;
// refused is told of every peer it turns away.
type memberGater struct {
	c       *Consortium
	self    peer.ID
	refused func(peer.ID)
}

func (g memberGater) ok(p peer.ID) bool {
	if p == g.self || g.c.Admits(p) {
		return true
	}
	if g.refused != nil {
		g.refused(p)
	}
	return false
}

func (g memberGater) InterceptPeerDial(p peer.ID) bool                 { return g.ok(p) }
func (g memberGater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return g.ok(p) }
func (g memberGater) InterceptAccept(network.ConnMultiaddrs) bool      { return true }
func (g memberGater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return g.ok(p)
}
func (g memberGater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}
