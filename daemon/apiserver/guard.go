package apiserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"slices"
	"strings"
)

// Policy says who may do what through the API.
//
//   - Public paths (probes, the daemon's identity, the static dashboard
//     page) are open to every GET and HEAD.
//   - Mutating requests (any method but GET, HEAD and OPTIONS, save the
//     ReadOnlyPosts) need the token everywhere; without a token they are
//     refused outright.
//   - Reads need the token when ReadsNeedToken is set: the API listens
//     beyond loopback. On loopback they are open, but only to requests
//     whose Host names a loopback address, so that a web page cannot reach
//     them through DNS rebinding.
type Policy struct {
	// Token is the bearer token ("": none, so no job control).
	Token string
	// ReadsNeedToken asks for the token on reads too.
	ReadsNeedToken bool
	// Public are the paths anyone may GET.
	Public []string
	// ReadOnlyPosts are the POST paths that change nothing (/predict).
	ReadOnlyPosts []string
}

// Guard wraps h with p's rules. Refusals are plain text saying why and
// what to do; a missing or wrong token is 401 with a Bearer challenge, a
// mutating request to a daemon without a token 403.
func Guard(h http.Handler, p Policy) http.Handler {
	var want [32]byte
	if p.Token != "" {
		want = sha256.Sum256([]byte(p.Token))
	}
	authorized := func(r *http.Request) bool {
		got, ok := BearerToken(r.Header.Get("Authorization"))
		if !ok || p.Token == "" {
			return false
		}
		// Hashes of equal length: the comparison takes the same time
		// whatever the token's length or how much of it matches.
		h := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(h[:], want[:]) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read := r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions ||
			(r.Method == http.MethodPost && slices.Contains(p.ReadOnlyPosts, r.URL.Path))
		switch {
		case read && slices.Contains(p.Public, r.URL.Path):
		case !read && p.Token == "":
			http.Error(w, "forbidden: "+r.Method+" "+r.URL.Path+" changes the daemon, and this daemon has no API token; "+
				"start it with --api-token FILE (gossipd init or gossipd token creates one) to use job control", http.StatusForbidden)
			return
		case !read || p.ReadsNeedToken:
			if !authorized(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="gossipd"`)
				why := "no bearer token"
				if r.Header.Get("Authorization") != "" {
					why = "wrong or malformed bearer token"
				}
				http.Error(w, "unauthorized: "+why+" for "+r.Method+" "+r.URL.Path+"; send Authorization: Bearer TOKEN, the token in the daemon's --api-token file", http.StatusUnauthorized)
				return
			}
		case !loopbackHost(r.Host) && !authorized(r):
			http.Error(w, "forbidden: this API listens on loopback and answers requests to a loopback host only (Host: "+r.Host+")", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// BearerToken returns the token of an Authorization header value
// ("Bearer TOKEN", the scheme in any case).
func BearerToken(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost or a loopback IP, with or without a port.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
