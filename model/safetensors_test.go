package model

import (
	"bytes"
	"errors"
	"testing"
)

func TestSafetensorsRoundTrip(t *testing.T) {
	m, _ := New(Spec{Kind: MLP, Inputs: 5, Hidden: []int{4}, Classes: 3}, WithSeed(2))
	var b bytes.Buffer
	if err := WriteSafetensors(&b, m.Layout(), m.Params(), map[string]string{"job": "x"}); err != nil {
		t.Fatal(err)
	}
	if n := b.Bytes()[0]; (int(n)+8)%8 != 0 {
		t.Fatalf("data not 8-byte aligned: header %d", n)
	}
	m2, _ := New(Spec{Kind: MLP, Inputs: 5, Hidden: []int{4}, Classes: 3}, WithSeed(9))
	meta, err := LoadSafetensors(b.Bytes(), m2.Layout(), m2.Params())
	if err != nil || meta["job"] != "x" {
		t.Fatalf("%v %v", meta, err)
	}
	for i, v := range m.Params() {
		if m2.Params()[i] != v {
			t.Fatalf("param %d differs", i)
		}
	}
	other, _ := New(Spec{Kind: MLP, Inputs: 5, Hidden: []int{6}, Classes: 3})
	if _, err := LoadSafetensors(b.Bytes(), other.Layout(), other.Params()); !errors.Is(err, ErrSafetensors) {
		t.Fatalf("shape mismatch: %v", err)
	}
	for _, bad := range [][]byte{nil, {1, 0, 0, 0, 0, 0, 0, 0}, append([]byte{200, 0, 0, 0, 0, 0, 0, 0}, []byte("{}")...)} {
		if _, _, _, err := ReadSafetensors(bad); !errors.Is(err, ErrSafetensors) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

func FuzzReadSafetensors(f *testing.F) {
	m, _ := New(Spec{Kind: Softmax, Inputs: 3, Classes: 2})
	var b bytes.Buffer
	WriteSafetensors(&b, m.Layout(), m.Params(), map[string]string{"a": "b"})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		ReadSafetensors(in) // must not panic
	})
}
