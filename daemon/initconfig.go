package daemon

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gossipd/gossipd/daemon/apiserver"
	"github.com/gossipd/gossipd/internal/cli"
)

// InitOptions say what `gossipd init` writes.
type InitOptions struct {
	Out       string // the config file ("-": stdout)
	Profile   string // a key of Profiles
	TokenFile string // the API token file to create ("": api.token beside Out)
	NoToken   bool   // create no token file and name none
}

// WriteConfig writes a commented config file for `gossipd run --config`:
// every setting by group at its default or at the profile's value, and
// creates the API token file it names (kept if it exists).
func WriteConfig(o InitOptions, stdout, stderr io.Writer) error {
	settings, ok := Profiles[o.Profile]
	if !ok {
		return fmt.Errorf("%w: --profile %q, want default|edge", cli.ErrUsage, o.Profile)
	}
	if o.Out != "-" {
		if _, err := os.Stat(o.Out); err == nil {
			return fmt.Errorf("%w: %s exists", cli.ErrUsage, o.Out)
		}
	}
	rf := flag.NewFlagSet("run", flag.ContinueOnError)
	var r Settings
	r.Register(rf)
	header := "# gossipd run configuration. Keys are `gossipd run` flags; flags and\n# $GOSSIPD_* variables override what is set here.\n"
	if len(settings) > 0 {
		header += fmt.Sprintf("#\n# Profile %s:\n", o.Profile)
		for _, x := range settings {
			if err := rf.Set(x.Flag, x.Value); err != nil {
				return fmt.Errorf("profile %s: %s: %w", o.Profile, x.Flag, err)
			}
			header += fmt.Sprintf("#   %s: %s (%s)\n", x.Flag, x.Value, x.Why)
		}
	}
	if o.TokenFile == "" && !o.NoToken {
		dir := "."
		if o.Out != "-" {
			dir = filepath.Dir(o.Out)
		}
		o.TokenFile = filepath.Join(dir, "api.token")
	}
	if o.TokenFile != "" {
		abs, err := filepath.Abs(o.TokenFile)
		if err != nil {
			return err
		}
		_, created, err := apiserver.LoadOrCreateTokenFile(abs)
		if err != nil {
			return err
		}
		rf.Set("api-token", abs)
		verb := "created"
		if !created {
			verb = "kept"
		}
		fmt.Fprintf(stderr, "%s the API token %s (mode 0600): give it to clients with --api-token\n", verb, abs)
	}
	return cli.WriteNew(o.Out, cli.SettingsTemplate(rf, header+"\n", "config"), stdout)
}
