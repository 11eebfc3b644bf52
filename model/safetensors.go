package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// The safetensors format (huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header mapping tensor names to {dtype, shape,
// data_offsets} plus optional "__metadata__" (string → string), then the raw
// little-endian tensor data. gossipd writes F32 tensors named by the layout.

// ErrSafetensors marks an unreadable safetensors file.
var ErrSafetensors = errors.New("model: bad safetensors")

// maxSafetensorsHeader bounds the JSON header (100 MB, as the reference
// implementation does).
const maxSafetensorsHeader = 100 << 20

type stEntry struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets [2]int `json:"data_offsets"`
}

// WriteSafetensors writes params as the layout's F32 tensors, with meta
// as the file's metadata.
func WriteSafetensors(w io.Writer, l *Layout, params []float32, meta map[string]string) error {
	if len(params) != l.Size {
		return fmt.Errorf("%w: %d parameters for a layout of %d", ErrShape, len(params), l.Size)
	}
	hdr := map[string]any{}
	if len(meta) > 0 {
		hdr["__metadata__"] = meta
	}
	for _, t := range l.Tensors {
		hdr[t.Name] = stEntry{DType: "F32", Shape: t.Shape, Offsets: [2]int{4 * t.Offset, 4 * (t.Offset + t.Size())}}
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 { // align the data to 8 bytes, as the format recommends
		h = append(h, ' ')
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	buf = append(buf, h...)
	for _, v := range params {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	_, err = w.Write(buf)
	return err
}

// ReadSafetensors reads a file written by WriteSafetensors (F32 tensors)
// and returns its tensors (name → values and shape) and metadata.
func ReadSafetensors(b []byte) (map[string]Tensor, map[string][]float32, map[string]string, error) {
	if len(b) < 8 {
		return nil, nil, nil, fmt.Errorf("%w: %d bytes", ErrSafetensors, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxSafetensorsHeader || n > uint64(len(b)-8) {
		return nil, nil, nil, fmt.Errorf("%w: header length %d for a %d-byte file", ErrSafetensors, n, len(b))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: header: %v", ErrSafetensors, err)
	}
	data := b[8+n:]
	meta := map[string]string{}
	shapes := map[string]Tensor{}
	values := map[string][]float32{}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "__metadata__" {
			if err := json.Unmarshal(raw[name], &meta); err != nil {
				return nil, nil, nil, fmt.Errorf("%w: metadata: %v", ErrSafetensors, err)
			}
			continue
		}
		var e stEntry
		if err := json.Unmarshal(raw[name], &e); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: tensor %q: %v", ErrSafetensors, name, err)
		}
		if e.DType != "F32" {
			return nil, nil, nil, fmt.Errorf("%w: tensor %q has dtype %s; gossipd reads F32", ErrSafetensors, name, e.DType)
		}
		size := 1
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && size > math.MaxInt32/d) {
				return nil, nil, nil, fmt.Errorf("%w: tensor %q: shape %v", ErrSafetensors, name, e.Shape)
			}
			size *= d
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > len(data) || hi-lo != 4*size {
			return nil, nil, nil, fmt.Errorf("%w: tensor %q: offsets %v for shape %v in %d data bytes", ErrSafetensors, name, e.Offsets, e.Shape, len(data))
		}
		v := make([]float32, size)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[lo+4*i:]))
		}
		shapes[name] = Tensor{Name: name, Shape: e.Shape, Offset: lo / 4}
		values[name] = v
	}
	return shapes, values, meta, nil
}

// LoadSafetensors fills params (laid out by l) from a safetensors file that
// holds every tensor of l with its shape.
func LoadSafetensors(b []byte, l *Layout, params []float32) (map[string]string, error) {
	shapes, values, meta, err := ReadSafetensors(b)
	if err != nil {
		return nil, err
	}
	for _, t := range l.Tensors {
		got, ok := shapes[t.Name]
		if !ok || !slices.Equal(got.Shape, t.Shape) {
			return nil, fmt.Errorf("%w: tensor %s%v missing or of another shape", ErrSafetensors, t.Name, t.Shape)
		}
		copy(params[t.Offset:t.Offset+t.Size()], values[t.Name])
	}
	return meta, nil
}
