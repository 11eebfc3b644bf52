package dataset

// Reading sources: decompression and the check that a text format's
// source is text.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
)

// newBufReader buffers a source for the decoders.
func newBufReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 1<<16) }

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

// openText returns the (decompressed) text of a CSV or LIBSVM source. It
// refuses binary data, which would otherwise fail as a puzzling parse
// error on line 1: an IDX file given where its directory belongs, or any
// file that is not text (a NUL byte in its first 4 KiB).
func openText(r io.Reader, name, format string) (io.Reader, error) {
	zr, err := maybeGunzip(newBufReader(r), name)
	if err != nil {
		return nil, err
	}
	br, plain := zr.(*bufio.Reader) // a plain source is buffered already
	if !plain {
		br = newBufReader(zr)
	}
	head, _ := br.Peek(4096) // a read error is met again by the parser
	if k := bytes.IndexByte(head, 0); k >= 0 {
		if len(head) >= 4 && head[0] == 0 && head[1] == 0 && head[2] == 8 {
			return nil, fmt.Errorf("%s: %w: an IDX file; give the directory that holds it and the other three (train-images-idx3-ubyte, …)", name, ErrFormat)
		}
		return nil, fmt.Errorf("%s: %w: binary data (a NUL byte at offset %d), not %s text", name, ErrFormat, k, format)
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
