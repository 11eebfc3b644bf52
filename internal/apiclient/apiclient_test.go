package apiclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDoErrors: a daemon's answer comes back; its refusal comes back with
// its status and text (and the token hint for a 401 without one); an HTML
// page, which no daemon serves on its API paths, is named as some other
// server's, not dumped.
func TestDoErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"peer":"x"}`))
		case "/pause":
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("<!DOCTYPE HTML>\n<html><body>File not found</body></html>\n"))
		}
	}))
	defer srv.Close()
	c, err := (&Flags{API: srv.URL}).New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if b, err := c.Do(ctx, "GET", "/status", nil); err != nil || string(b) != `{"peer":"x"}` {
		t.Errorf("/status: %q, %v", b, err)
	}
	if _, err := c.Do(ctx, "POST", "/pause", nil); err == nil || !strings.Contains(err.Error(), "401 Unauthorized: unauthorized (give --api-token FILE") {
		t.Errorf("/pause: %v", err)
	}
	_, err = c.Do(ctx, "GET", "/jobs", nil)
	if err == nil || !strings.Contains(err.Error(), "an HTML page: is "+srv.URL+" a gossipd daemon's API?") || strings.Contains(err.Error(), "DOCTYPE") {
		t.Errorf("/jobs from another server: %v", err)
	}
}
