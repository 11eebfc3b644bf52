package dataset

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// IDX element types (the third byte of the magic number).
const (
	idxUint8   = 0x08
	idxInt8    = 0x09
	idxInt16   = 0x0B
	idxInt32   = 0x0C
	idxFloat32 = 0x0D
	idxFloat64 = 0x0E
)

// maxIDXBytes bounds the data size an IDX header may announce, so that a
// hostile header cannot make the loader allocate without limit. It fits an
// int on 32-bit platforms too.
const maxIDXBytes = 1 << 30

// IDXArray is a decoded IDX file: its dimensions and its values as float32
// (32-bit integers beyond 2^24 lose precision).
type IDXArray struct {
	Dims []int
	Data []float32
}

// ReadIDXFile reads an IDX file, gzip-compressed or raw.
func ReadIDXFile(path string) (*IDXArray, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	return ReadIDX(f, path)
}

// ReadIDX decodes an IDX stream, gzip-compressed or raw. name is used in
// error messages, which give the byte offset (in the decompressed stream) of
// what is wrong.
func ReadIDX(r io.Reader, name string) (*IDXArray, error) {
	rd, h, err := openIDX(r, name)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, 0, min(h.total*h.size, 1<<26))
	buf := make([]byte, 1<<16)
	need := h.total * h.size
	for len(raw) < need {
		k := min(len(buf), need-len(raw))
		n, err := io.ReadFull(rd, buf[:k])
		raw = append(raw, buf[:n]...)
		if err := h.readErr(err, len(raw)); err != nil {
			return nil, err
		}
	}
	if err := h.noTrailing(rd); err != nil {
		return nil, err
	}
	data := make([]float32, h.total)
	if err := h.decode(data, raw, h.start); err != nil {
		return nil, err
	}
	return &IDXArray{Dims: h.dims, Data: data}, nil
}

// ReadIDXRows decodes the rows keep (indices along the first dimension,
// each at most once) of an IDX stream, in keep's order, reading the rest
// past without keeping it: a shard of a large file costs the shard's
// memory, not the file's.
func ReadIDXRows(r io.Reader, name string, keep []int) (*IDXArray, error) {
	rd, h, err := openIDX(r, name)
	if err != nil {
		return nil, err
	}
	n := h.dims[0]
	rowElems := h.total / n
	if rowElems*h.size > 1<<26 {
		return nil, fmt.Errorf("%s: %w: rows of %d bytes; reading rows apart takes rows of 64 MiB at most", name, ErrFormat, rowElems*h.size)
	}
	// Where each kept row goes (a map: a hostile header may announce
	// billions of rows, and only the kept ones cost memory).
	slot := make(map[int]int, len(keep))
	for k, i := range keep {
		if _, dup := slot[i]; i < 0 || i >= n || dup {
			return nil, fmt.Errorf("%s: row %d: %w: not one of the file's %d rows, or asked for twice", name, i, ErrShape, n)
		}
		slot[i] = k
	}
	data := make([]float32, len(keep)*rowElems)
	row := make([]byte, rowElems*h.size)
	for i := range n {
		got, err := io.ReadFull(rd, row)
		if err := h.readErr(err, i*len(row)+got); err != nil {
			return nil, err
		}
		if k, ok := slot[i]; ok {
			if err := h.decode(data[k*rowElems:(k+1)*rowElems], row, h.start+i*len(row)); err != nil {
				return nil, err
			}
		}
	}
	if err := h.noTrailing(rd); err != nil {
		return nil, err
	}
	dims := append([]int{len(keep)}, h.dims[1:]...)
	return &IDXArray{Dims: dims, Data: data}, nil
}

// idxHeader is what an IDX header says.
type idxHeader struct {
	name  string
	typ   byte
	size  int // bytes per element
	dims  []int
	total int // elements
	start int // byte offset of the data
}

// openIDX reads an IDX header from r (gzip-compressed or raw) and returns
// the reader positioned at the data.
func openIDX(r io.Reader, name string) (io.Reader, *idxHeader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	rd, err := maybeGunzip(br, name)
	if err != nil {
		return nil, nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(rd, hdr[:]); err != nil {
		return nil, nil, fmt.Errorf("%s: byte 0: %w: truncated IDX header (%v)", name, ErrFormat, err)
	}
	if hdr[0] != 0 || hdr[1] != 0 {
		return nil, nil, fmt.Errorf("%s: byte 0: %w: bad IDX magic %02x%02x%02x%02x", name, ErrFormat, hdr[0], hdr[1], hdr[2], hdr[3])
	}
	h := &idxHeader{name: name, typ: hdr[2]}
	nd := int(hdr[3])
	switch h.typ {
	case idxUint8, idxInt8:
		h.size = 1
	case idxInt16:
		h.size = 2
	case idxInt32, idxFloat32:
		h.size = 4
	case idxFloat64:
		h.size = 8
	default:
		return nil, nil, fmt.Errorf("%s: byte 2: %w: unknown IDX element type 0x%02x", name, ErrFormat, h.typ)
	}
	if nd == 0 {
		return nil, nil, fmt.Errorf("%s: byte 3: %w: IDX file with 0 dimensions", name, ErrFormat)
	}
	h.dims = make([]int, nd)
	h.total = 1
	for i := range h.dims {
		var b [4]byte
		off := 4 + 4*i
		if _, err := io.ReadFull(rd, b[:]); err != nil {
			return nil, nil, fmt.Errorf("%s: byte %d: %w: truncated IDX dimension %d (%v)", name, off, ErrFormat, i, err)
		}
		h.dims[i] = int(binary.BigEndian.Uint32(b[:]))
		if h.dims[i] == 0 {
			return nil, nil, fmt.Errorf("%s: byte %d: %w: IDX dimension %d is 0", name, off, ErrFormat, i)
		}
		if int64(h.total)*int64(h.dims[i])*int64(h.size) > maxIDXBytes {
			return nil, nil, fmt.Errorf("%s: byte %d: %w: IDX header announces more than %d bytes of data", name, off, ErrFormat, maxIDXBytes)
		}
		h.total *= h.dims[i]
	}
	h.start = 4 + 4*nd
	return rd, h, nil
}

// readErr turns an error reading the data, read bytes of it so far, into
// one that says where.
func (h *idxHeader) readErr(err error, read int) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrFormat) {
		return fmt.Errorf("%s: byte %d: %w", h.name, h.start+read, err)
	}
	return fmt.Errorf("%s: byte %d: %w: truncated IDX data: header announces %d elements of %d bytes, stream ends after %d bytes of data",
		h.name, h.start+read, ErrFormat, h.total, h.size, read)
}

// noTrailing checks that the stream ends with the data.
func (h *idxHeader) noTrailing(rd io.Reader) error {
	var b [1]byte
	if n, _ := rd.Read(b[:]); n > 0 {
		return fmt.Errorf("%s: byte %d: %w: trailing data after the %d announced IDX elements", h.name, h.start+h.total*h.size, ErrFormat, h.total)
	}
	return nil
}

// decode converts raw elements (starting at byte off of the stream) into
// dst, refusing non-finite values.
func (h *idxHeader) decode(dst []float32, raw []byte, off int) error {
	size := h.size
	switch h.typ { // bytes are always finite: one tight loop, no checks
	case idxUint8:
		raw = raw[:len(dst)]
		for i, c := range raw {
			dst[i] = float32(c)
		}
		return nil
	case idxInt8:
		raw = raw[:len(dst)]
		for i, c := range raw {
			dst[i] = float32(int8(c))
		}
		return nil
	}
	for i := range dst {
		b := raw[i*size : (i+1)*size]
		var v float64
		switch h.typ {
		case idxUint8:
			v = float64(b[0])
		case idxInt8:
			v = float64(int8(b[0]))
		case idxInt16:
			v = float64(int16(binary.BigEndian.Uint16(b)))
		case idxInt32:
			v = float64(int32(binary.BigEndian.Uint32(b)))
		case idxFloat32:
			v = float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
		case idxFloat64:
			v = math.Float64frombits(binary.BigEndian.Uint64(b))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: byte %d: %w: non-finite IDX value", h.name, off+i*size, ErrFormat)
		}
		dst[i] = float32(v)
	}
	return nil
}

// LoadIDX builds a dataset from an IDX image file (N × any dims, flattened to
// N × D) and an IDX label file (N labels).
func LoadIDX(imagesPath, labelsPath string) (*Dataset, error) {
	img, err := ReadIDXFile(imagesPath)
	if err != nil {
		return nil, err
	}
	lab, err := ReadIDXFile(labelsPath)
	if err != nil {
		return nil, err
	}
	return FromIDX(img, lab, imagesPath)
}

// loadIDXRows loads the examples keep picks from their labels: the label
// file is read whole, the images only in the rows kept.
func loadIDXRows(imagesPath, labelsPath string, keep func(y []int32, classes int) ([]int, error)) (*Dataset, error) {
	lab, err := ReadIDXFile(labelsPath)
	if err != nil {
		return nil, err
	}
	all, err := FromIDX(&IDXArray{Dims: []int{lab.Dims[0], 0}, Data: nil}, lab, labelsPath)
	if err != nil {
		return nil, err
	}
	rows, err := keep(all.Y, all.Classes)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: %w: no training example kept", imagesPath, ErrShape)
	}
	f, err := os.Open(imagesPath)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	img, err := ReadIDXRows(f, imagesPath, rows)
	if err != nil {
		return nil, err
	}
	kept := &IDXArray{Dims: []int{len(rows)}, Data: make([]float32, len(rows))}
	for k, i := range rows {
		kept.Data[k] = float32(all.Y[i])
	}
	ds, err := FromIDX(img, kept, imagesPath)
	if err != nil {
		return nil, err
	}
	ds.Classes = all.Classes // of the whole set, not of the rows kept
	return ds, nil
}

// FromIDX pairs decoded image and label arrays into a dataset. The dataset
// takes img's data as its features (no copy: a 60,000-image set is 188 MB
// of float32, and a second copy doubled the peak memory of loading it);
// img must not be used after.
func FromIDX(img, lab *IDXArray, name string) (*Dataset, error) {
	n := img.Dims[0]
	if len(lab.Dims) != 1 {
		return nil, fmt.Errorf("%s: %w: label file has %d dimensions, want 1", name, ErrShape, len(lab.Dims))
	}
	if lab.Dims[0] != n {
		return nil, fmt.Errorf("%s: %w: %d images but %d labels", name, ErrShape, n, lab.Dims[0])
	}
	d := len(img.Data) / n
	ds := &Dataset{Name: name, N: n, D: d, X: img.Data, Y: make([]int32, n)}
	switch dims := img.Dims[1:]; len(dims) {
	case 2: // H×W images
		ds.Shape = []int{1, dims[0], dims[1]}
	case 3: // C×H×W
		ds.Shape = slices.Clone(dims)
	}
	img.Data = nil
	for i, v := range lab.Data {
		if v < 0 || v >= MaxClasses || float64(v) != math.Trunc(float64(v)) {
			return nil, fmt.Errorf("%s: label %d: %w: %v", name, i, ErrLabelRange, v)
		}
		ds.Y[i] = int32(v)
	}
	ds.Classes = classCount(ds.Y, 1)
	return ds, nil
}
