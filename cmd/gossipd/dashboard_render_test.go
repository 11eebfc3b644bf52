//go:build chromium

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDashboardRendering loads the dashboard page (daemon/web/index.html)
// in headless Chromium against a stand-in API whose /status lists one
// member of the job over two connections (TCP in, QUIC out) and a peer of
// another job over one. The peers table has one row per peer, the member
// first, with both of its links and its job; the other is marked as not
// in the job. Both charts carry tick labels on both axes: times of day
// along x, accuracy and loss, and bytes per second, up the sides.
func TestDashboardRendering(t *testing.T) {
	page, err := os.ReadFile("../../daemon/web/index.html")
	if err != nil {
		t.Fatal(err)
	}
	const member, stranger = "12D3KooWMemberAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "12D3KooWStrangerBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	opened := time.Now().Add(-time.Minute)
	status := map[string]any{
		"peer_id": "12D3KooWSelf", "job_id": strings.Repeat("ab", 32), "protocol": "randomwalk", "uptime_seconds": 60,
		"peers": 1, "members": 2, "member_peers": []string{member}, "other_job_peers": 1, "unknown_peers": 0,
		"accuracy": 0.9, "loss": 0.3, "updates": 12, "model_age": 400,
		"connections": []map[string]any{
			{"peer": member, "type": "direct", "transport": "tcp", "direction": "inbound", "addr": "/ip4/127.0.0.1/tcp/4001", "rtt_ms": 1.5, "opened": opened},
			{"peer": member, "type": "direct", "transport": "quic-v1", "direction": "outbound", "addr": "/ip4/127.0.0.1/udp/4001/quic-v1", "rtt_ms": 1.5, "opened": opened},
			{"peer": stranger, "type": "direct", "transport": "tcp", "direction": "outbound", "addr": "/ip4/127.0.0.1/tcp/4002", "opened": opened},
		},
		"traffic": map[string]any{member: map[string]any{"messages_in": 7, "messages_out": 9}},
	}
	var history []map[string]any
	t0 := float64(time.Now().Add(-time.Minute).Unix())
	for i := range 10 {
		history = append(history, map[string]any{"t": t0 + 6*float64(i), "accuracy": 0.5 + 0.04*float64(i), "loss": 2 - 0.15*float64(i),
			"bytes_in": 1000 * i * i, "bytes_out": 800 * i * i})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
	for path, v := range map[string]any{"/status": status, "/history": history, "/announcements": []any{}} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	dom, log := chromium(t, srv.URL+"/", "--dump-dom", "--window-size=1280,1000")
	if strings.Contains(log, ":CONSOLE") || strings.Contains(log, "Uncaught") {
		t.Errorf("console messages:\n%s", consoleLines(log))
	}
	m := regexp.MustCompile(`(?s)<tbody id="peers">(.*?)</tbody>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no peers table:\n%s", dom)
	}
	rows := regexp.MustCompile(`(?s)<tr>.*?</tr>`).FindAllString(m[1], -1)
	if len(rows) != 2 {
		t.Fatalf("the peers table has %d rows for 2 peers (3 connections), want one per peer:\n%s", len(rows), m[1])
	}
	if !strings.Contains(rows[0], `title="`+member+`"`) || !strings.Contains(rows[0], "this job") ||
		!strings.Contains(rows[0], "tcp inbound") || !strings.Contains(rows[0], "quic-v1 outbound") || !strings.Contains(rows[0], "<td>1.5 ms</td>") {
		t.Errorf("the member's row (first) lacks its ID, its job, one of its links or its RTT: %s", rows[0])
	}
	if !strings.Contains(rows[1], `title="`+stranger+`"`) || !strings.Contains(rows[1], "not in this job") {
		t.Errorf("the other job's peer's row does not say it is outside the job: %s", rows[1])
	}
	if !regexp.MustCompile(`id="outside">1<`).MatchString(dom) {
		t.Errorf("the page does not count the one peer outside the job")
	}
	for _, chart := range []string{"chart-acc", "chart-traffic"} {
		c := regexp.MustCompile(`(?s)<svg id="` + chart + `".*?</svg>`).FindString(dom)
		if c == "" {
			t.Fatalf("no %s:\n%s", chart, dom)
		}
		for _, axis := range []string{"x", "y"} {
			ticks := regexp.MustCompile(`<text class="tick `+axis+`"[^>]*>([^<]+)</text>`).FindAllStringSubmatch(c, -1)
			if len(ticks) < 3 {
				t.Errorf("%s: %d labelled ticks on the %s axis, want ≥ 3:\n%s", chart, len(ticks), axis, c)
				continue
			}
			if axis == "x" && !regexp.MustCompile(`^\d\d:\d\d:\d\d$`).MatchString(ticks[0][1]) {
				t.Errorf("%s: x tick %q is not a time of day", chart, ticks[0][1])
			}
		}
	}
	acc := regexp.MustCompile(`(?s)<svg id="chart-acc".*?</svg>`).FindString(dom)
	if !strings.Contains(acc, `>1.00</text>`) || !strings.Contains(acc, `class="tick y2"`) {
		t.Errorf("the accuracy chart's axes: want accuracy up to 1.00 on the left and loss on the right:\n%s", acc)
	}
	if tr := regexp.MustCompile(`(?s)<svg id="chart-traffic".*?</svg>`).FindString(dom); !strings.Contains(tr, "/s</text>") {
		t.Errorf("the traffic chart's y axis is not in bytes per second:\n%s", tr)
	}
}
