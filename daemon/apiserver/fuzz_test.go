package apiserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseToken: any file contents give a token or an error, never a
// token with a space or control character in it.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"", "abcdefghijklmnopqrstuvwxyz\n", "abc def\n", "\x00\x01", "0123456789abcdef\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		if len(tok) < MinTokenLen || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("ParseToken(%q) = %q", s, tok)
		}
	})
}

// FuzzGuard: a mutating request gets through only with the exact token,
// whatever the Authorization header holds.
func FuzzGuard(f *testing.F) {
	const token = "0123456789abcdefghij"
	for _, s := range []string{"", "Bearer " + token, "bearer " + token + " ", "Bearer", "Bearer " + token + "x", "Basic x", "Bearer  " + token[:10]} {
		f.Add(s, "/pause")
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := Guard(ok, Policy{Token: token, ReadsNeedToken: true, Public: []string{"/healthz"}})
	f.Fuzz(func(t *testing.T, auth, path string) {
		req := &http.Request{Method: "POST", URL: &url.URL{Path: path}, Host: "10.0.0.1", Header: http.Header{"Authorization": {auth}}}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		got, _ := BearerToken(auth)
		if (w.Code == 200) != (got == token) {
			t.Fatalf("Authorization %q: %d", auth, w.Code)
		}
	})
}
