package transport_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/gossipd/gossipd/"

// TestTransportsMoveBytesOnly holds the import rule of the transports: a
// transport (daemon/p2p, daemon/memnet), what they share (daemon/transport) and
// their conformance suite depend on no gossipd package but daemon/transport
// — not the core (gossip), the driver (peer), model, merge, privacy,
// dataset, simulation or the daemon — so none of them can call up into
// the code that encodes, decodes or learns. Only daemon/p2p imports libp2p.
// The rule covers what the packages build with (go list's Deps), not
// their tests.
func TestTransportsMoveBytesOnly(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list imports with")
	}
	for _, pkg := range []string{"daemon/transport", "daemon/p2p", "daemon/memnet", "daemon/transporttest"} {
		out, err := exec.Command(gocmd, "list", "-deps", "-f", "{{.ImportPath}}", module+pkg).Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list -deps %s listed nothing", pkg)
		}
		for _, d := range deps {
			switch {
			case d == module+pkg || d == module+"daemon/transport":
			case strings.HasPrefix(d, module):
				t.Errorf("%s depends on %s: a transport may import no gossipd package but daemon/transport", pkg, strings.TrimPrefix(d, module))
			case strings.HasPrefix(d, "github.com/libp2p/") && pkg != "daemon/p2p":
				t.Errorf("%s depends on %s: only daemon/p2p imports libp2p", pkg, d)
			}
		}
	}
}
