//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gossipd/gossipd/daemon/apiserver"
)

// The daemons' APIs listen on their containers' addresses, beyond
// loopback, so every read but the probes needs their token. The suite's
// own containers share one, made in a volume before they start
// (setupToken) and mounted by each (tokenArgs); a compose project's come
// from its containers (readToken).

// tokenVolume holds the suite's token, /shared/api.token in the
// containers: a new volume takes the ownership of the image's /shared
// (the unprivileged user's), so the token made there is that user's. Its
// name is the run's own (tokenVolumePrefix, the process ID and the
// time), so a volume an earlier run left, still held by a container it
// left, cannot hand this run a stale file.
var tokenVolume = fmt.Sprintf("%s%d-%d", tokenVolumePrefix, os.Getpid(), time.Now().UnixNano())

const tokenVolumePrefix = "gossipd-e2e-token-"

var (
	suiteToken string
	tokens     sync.Map // container IP → token, where not the suite's
)

// tokenArgs are the `docker run` options that give a container the
// suite's token.
func tokenArgs() []string {
	return []string{"-v", tokenVolume + ":/shared:ro", "-e", "GOSSIPD_API_TOKEN=/shared/api.token"}
}

// setupToken creates the suite's token in a fresh volume, as the image's
// unprivileged user (`gossipd token`), and reads it back.
func setupToken() error {
	removeStaleTokenVolumes()
	if out, err := dockerErr("volume", "create", tokenVolume); err != nil {
		return fmt.Errorf("docker volume create %s: %v: %s", tokenVolume, err, out)
	}
	if out, err := dockerErr("run", "--rm", "-v", tokenVolume+":/shared", image, "token", "--out", "/shared/api.token"); err != nil {
		return fmt.Errorf("gossipd token: %v: %s", err, out)
	}
	const reader = "gossipd-e2e-token-reader"
	dockerErr("rm", "-f", "-v", reader)
	if out, err := dockerErr("create", "--name", reader, "-v", tokenVolume+":/shared", image); err != nil {
		return fmt.Errorf("docker create: %v: %s", err, out)
	}
	defer dockerErr("rm", "-f", "-v", reader)
	tok, err := readToken(reader, "/shared/api.token")
	suiteToken = tok
	return err
}

// removeStaleTokenVolumes removes the token volumes of earlier runs that
// no container holds any more (docker refuses the others, which belong to
// a run still going or to containers its own cleanup will remove).
func removeStaleTokenVolumes() {
	out, err := dockerErr("volume", "ls", "-q", "--filter", "name="+tokenVolumePrefix)
	if err != nil {
		return
	}
	for _, v := range strings.Fields(out) {
		if strings.HasPrefix(v, tokenVolumePrefix) {
			dockerErr("volume", "rm", v)
		}
	}
}

// readToken copies a token file out of a container (`docker cp`, which
// needs no shell in the image) and checks it.
func readToken(container, path string) (string, error) {
	out, err := exec.Command("docker", "cp", container+":"+path, "-").Output()
	if err != nil {
		return "", fmt.Errorf("docker cp %s:%s: %w", container, path, err)
	}
	tr := tar.NewReader(bytes.NewReader(out))
	if _, err := tr.Next(); err != nil {
		return "", fmt.Errorf("docker cp %s:%s: %w", container, path, err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(tr); err != nil {
		return "", err
	}
	return apiserver.ParseToken(b.String())
}

// containerToken reads the token a running container's daemon uses (its
// GOSSIPD_API_TOKEN), waiting (bounded) for the daemon to create it, and
// records it for the container's address.
func containerToken(container, ip string) error {
	env, err := dockerErr("inspect", "-f", "{{range .Config.Env}}{{println .}}{{end}}", container)
	if err != nil {
		return fmt.Errorf("docker inspect %s: %w", container, err)
	}
	var path string
	for _, l := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "GOSSIPD_API_TOKEN="); ok {
			path = v
		}
	}
	if path == "" {
		return fmt.Errorf("%s: no GOSSIPD_API_TOKEN in its environment", container)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		tok, err := readToken(container, path)
		if err == nil {
			tokens.Store(ip, tok)
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// tokenFor returns the token for a URL's host.
func tokenFor(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return suiteToken
	}
	host, _, err := net.SplitHostPort(u.Host)
	if err != nil {
		host = u.Host
	}
	if t, ok := tokens.Load(host); ok {
		return t.(string)
	}
	return suiteToken
}
