package daemon

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/model"
)

// maxPredictBody bounds a /predict request.
const maxPredictBody = 16 << 20

// dashboardHTML is the page served at /.
//
//go:embed web/index.html
var dashboardHTML []byte

// PublicPaths are the API paths anyone who reaches the daemon may read
// (apiserver.Policy): the probes, the daemon's peer ID and addresses
// (which its announcements tell the network anyway) and the static
// dashboard page, which holds no data of its own.
var PublicPaths = []string{"/healthz", "/readyz", "/id", "/"}

// ReadOnlyPosts are the POST paths that change nothing.
var ReadOnlyPosts = []string{"/predict"}

// Handler serves the operator API: / (the dashboard), /history (recent
// samples for its charts), /healthz (the process serves), /readyz
// (it trains with peers: see Ready), /status (JSON), /metrics
// (Prometheus), /model (the model as safetensors: the export), /predict
// (JSON), /jobs (the jobs announced on the network: ID, protocol, model,
// members seen, best accuracy), /announcements (the latest announcement
// of each peer) and job control: POST /pause and /resume (local
// training; see Pause) and POST /leave (leave the job and stop). The
// daemon serves it behind apiserver.Guard.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /pause", func(w http.ResponseWriter, r *http.Request) { n.servePause(w, r, true) })
	mux.HandleFunc("POST /resume", func(w http.ResponseWriter, r *http.Request) { n.servePause(w, r, false) })
	mux.HandleFunc("POST /leave", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-n.runDone:
			http.Error(w, "leave: the node has stopped", http.StatusConflict)
			return
		default:
		}
		n.Leave()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(map[string]any{"leaving": true, "job_id": n.job.String()})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		// The dashboard: one page, embedded, no external assets; it reads
		// /status, /history and /announcements.
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		w.Write(dashboardHTML)
	})
	mux.HandleFunc("GET /history", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n.History())
	})
	mux.HandleFunc("GET /id", func(w http.ResponseWriter, r *http.Request) {
		// Who this daemon is, for --bootstrap http://HOST:PORT: what its
		// announcements tell the network anyway.
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(transport.IDResponse{PeerID: n.cfg.Transport.ID(), Addrs: n.Status().Addrs})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := n.NotReady(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(n.Status())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.met.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /model", func(w http.ResponseWriter, r *http.Request) {
		format := cmp.Or(r.URL.Query().Get("format"), FormatSafetensors)
		var b bytes.Buffer
		if err := n.WriteModelAs(&b, format); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, ErrFormat) {
				code = http.StatusBadRequest
			}
			http.Error(w, "model: "+err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="model.`+format+`"`)
		w.Write(b.Bytes())
	})
	mux.HandleFunc("POST /predict", n.servePredict)
	mux.HandleFunc("GET /jobs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(n.Jobs())
	})
	mux.HandleFunc("GET /announcements", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(n.Announcements())
	})
	return mux
}

// servePause pauses or resumes local training and answers with the
// state now in effect.
func (n *Node) servePause(w http.ResponseWriter, r *http.Request, paused bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := n.setPaused(ctx, paused); err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, ErrNotRunning) {
			code = http.StatusConflict
		}
		http.Error(w, r.URL.Path[1:]+": "+err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"paused": paused})
}

// modelMetadata is what an exported model's safetensors metadata holds: the
// job spec and ID, the model's age and the feature scaler.
func (n *Node) modelMetadata(age float64) map[string]string {
	job, _ := json.Marshal(n.cfg.Job)
	meta := map[string]string{"format": "gossipd", "job_id": n.job.String(), "job": string(job),
		"age": strconv.FormatFloat(age, 'g', -1, 64)}
	if n.cfg.Scaler != nil {
		sc, _ := json.Marshal(n.cfg.Scaler)
		meta["scaler"] = string(sc)
	}
	return meta
}

// WriteModel writes the current model as safetensors with the job spec and
// the feature scaler in its metadata.
func (n *Node) WriteModel(w io.Writer) error { return n.WriteModelAs(w, FormatSafetensors) }

// WriteModelAs writes the current model in format (WriteModelAs).
func (n *Node) WriteModelAs(w io.Writer, format string) error {
	return WriteModelAs(w, format, n.cfg.Job.Model, n.Params(), n.modelMetadata(n.Status().ModelAge))
}

// PredictRequest is /predict's input: one feature vector or several, raw
// (the daemon applies its scaler).
type PredictRequest struct {
	Features  []float32   `json:"features,omitempty"`
	Instances [][]float32 `json:"instances,omitempty"`
}

// Prediction is one answer: the class and the class probabilities (decision
// scores for the SVM).
type Prediction struct {
	Class         int       `json:"class"`
	Probabilities []float32 `json:"probabilities"`
}

func (n *Node) servePredict(w http.ResponseWriter, r *http.Request) {
	var req PredictRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPredictBody))
	dec.DisallowUnknownFields() // a misspelt key would read as no vectors
	err := dec.Decode(&req)
	switch {
	case err == nil && dec.More():
		err = errors.New("more than one JSON value")
	case err == nil && req.Features != nil && req.Instances != nil:
		err = errors.New("both features and instances: give one")
	}
	if err != nil {
		http.Error(w, "predict: body must be JSON {\"features\": [...]} or {\"instances\": [[...], ...]}: "+err.Error(), http.StatusBadRequest)
		return
	}
	single := req.Features != nil
	rows := req.Instances
	if single {
		rows = [][]float32{req.Features}
	}
	preds, err := n.Predict(rows)
	if err != nil {
		http.Error(w, "predict: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if single {
		json.NewEncoder(w).Encode(preds[0])
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"predictions": preds})
}

// Predict classifies raw feature vectors with the current model.
func (n *Node) Predict(rows [][]float32) ([]Prediction, error) {
	d := n.cfg.Job.Model.Inputs
	if len(rows) == 0 {
		return nil, fmt.Errorf("no feature vectors")
	}
	x := make([]float32, 0, len(rows)*d)
	for i, row := range rows {
		if len(row) != d {
			return nil, fmt.Errorf("instance %d has %d features, the model takes %d", i, len(row), d)
		}
		start := len(x)
		x = append(x, row...)
		if n.cfg.Scaler != nil {
			n.cfg.Scaler.TransformRow(x[start:])
		}
	}
	m := n.predictors.Get().(*model.Model)
	defer n.predictors.Put(m)
	if err := m.SetParams(n.Params()); err != nil {
		return nil, err
	}
	C := n.cfg.Job.Model.Classes
	out := make([]float32, len(rows)*C)
	m.Predict(out, x, len(rows))
	preds := make([]Prediction, len(rows))
	for i := range preds {
		p := out[i*C : (i+1)*C]
		best := 0
		for c := range p {
			if p[c] > p[best] {
				best = c
			}
		}
		preds[i] = Prediction{Class: best, Probabilities: p}
	}
	return preds, nil
}
