package p2p

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
)

// ListenForAnnouncements joins the network through bootstrap (multiaddrs
// with /p2p/ID) as an observer with a throwaway identity (NewEphemeralKey),
// listens for d and returns the job announcements heard (what `gossipd
// jobs --bootstrap` lists). consortium names the consortium file of a
// private network ("": a public one).
func ListenForAnnouncements(ctx context.Context, bootstrap []string, consortium string, d time.Duration) ([]transport.Announcement, error) {
	key, err := NewEphemeralKey()
	if err != nil {
		return nil, err
	}
	var club *Consortium
	if consortium != "" {
		if club, err = LoadConsortium(consortium); err != nil {
			return nil, err
		}
	}
	host, err := New(Config{Key: key, Listen: []string{"/ip4/0.0.0.0/tcp/0"}, Bootstrap: bootstrap, Consortium: club, Observer: true, DHT: DHTOff,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	defer host.Close()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	return host.Announcements(), nil
}
