package dataset

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
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
	br := bufio.NewReaderSize(r, 1<<16)
	rd, err := maybeGunzip(br, name)
	if err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(rd, hdr[:]); err != nil {
		return nil, fmt.Errorf("%s: byte 0: %w: truncated IDX header (%v)", name, ErrFormat, err)
	}
	if hdr[0] != 0 || hdr[1] != 0 {
		return nil, fmt.Errorf("%s: byte 0: %w: bad IDX magic %02x%02x%02x%02x", name, ErrFormat, hdr[0], hdr[1], hdr[2], hdr[3])
	}
	typ, nd := hdr[2], int(hdr[3])
	var size int
	switch typ {
	case idxUint8, idxInt8:
		size = 1
	case idxInt16:
		size = 2
	case idxInt32, idxFloat32:
		size = 4
	case idxFloat64:
		size = 8
	default:
		return nil, fmt.Errorf("%s: byte 2: %w: unknown IDX element type 0x%02x", name, ErrFormat, typ)
	}
	if nd == 0 {
		return nil, fmt.Errorf("%s: byte 3: %w: IDX file with 0 dimensions", name, ErrFormat)
	}
	dims := make([]int, nd)
	total := 1
	for i := range dims {
		var b [4]byte
		off := 4 + 4*i
		if _, err := io.ReadFull(rd, b[:]); err != nil {
			return nil, fmt.Errorf("%s: byte %d: %w: truncated IDX dimension %d (%v)", name, off, ErrFormat, i, err)
		}
		dims[i] = int(binary.BigEndian.Uint32(b[:]))
		if dims[i] == 0 {
			return nil, fmt.Errorf("%s: byte %d: %w: IDX dimension %d is 0", name, off, ErrFormat, i)
		}
		if int64(total)*int64(dims[i])*int64(size) > maxIDXBytes {
			return nil, fmt.Errorf("%s: byte %d: %w: IDX header announces more than %d bytes of data", name, off, ErrFormat, maxIDXBytes)
		}
		total *= dims[i]
	}
	start := 4 + 4*nd
	raw := make([]byte, 0, min(total*size, 1<<26))
	buf := make([]byte, 1<<16)
	need := total * size
	for len(raw) < need {
		k := min(len(buf), need-len(raw))
		n, err := io.ReadFull(rd, buf[:k])
		raw = append(raw, buf[:n]...)
		if errors.Is(err, ErrFormat) {
			return nil, fmt.Errorf("%s: byte %d: %w", name, start+len(raw), err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: byte %d: %w: truncated IDX data: header announces %d elements of %d bytes, stream ends after %d bytes of data",
				name, start+len(raw), ErrFormat, total, size, len(raw))
		}
	}
	if n, _ := rd.Read(buf[:1]); n > 0 {
		return nil, fmt.Errorf("%s: byte %d: %w: trailing data after the %d announced IDX elements", name, start+need, ErrFormat, total)
	}
	data := make([]float32, total)
	for i := range data {
		b := raw[i*size : (i+1)*size]
		var v float64
		switch typ {
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
			return nil, fmt.Errorf("%s: byte %d: %w: non-finite IDX value", name, start+i*size, ErrFormat)
		}
		data[i] = float32(v)
	}
	return &IDXArray{Dims: dims, Data: data}, nil
}

// maybeGunzip returns a reader of the decompressed stream when br starts with
// the gzip magic, else br itself.
func maybeGunzip(br *bufio.Reader, name string) (io.Reader, error) {
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: bad gzip header: %v", name, ErrFormat, err)
		}
		return &gzipErrReader{zr: zr, name: name}, nil
	}
	return br, nil
}

// gzipErrReader labels decompression errors as format errors.
type gzipErrReader struct {
	zr   *gzip.Reader
	name string
}

func (g *gzipErrReader) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: corrupt gzip stream: %v", ErrFormat, err)
	}
	return n, err
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
