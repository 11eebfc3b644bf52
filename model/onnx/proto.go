package onnx

import "google.golang.org/protobuf/encoding/protowire"

// The messages of onnx.proto that a model needs, field numbers as
// there. onnx.proto is proto2: repeated numbers are written unpacked.

func appendVarint(b []byte, field protowire.Number, v int64) []byte {
	b = protowire.AppendTag(b, field, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func appendBytes(b []byte, field protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendString(b []byte, field protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// node is a NodeProto: input 1, output 2, name 3, op_type 4, attribute 5.
func node(op string, inputs []string, output string, attrs ...[]byte) []byte {
	var b []byte
	for _, in := range inputs {
		b = appendString(b, 1, in)
	}
	b = appendString(b, 2, output)
	b = appendString(b, 3, output)
	b = appendString(b, 4, op)
	for _, a := range attrs {
		b = appendBytes(b, 5, a)
	}
	return b
}

// AttributeProto: name 1, i 3, ints 8, type 20 (INT 2, INTS 7).
func attrInt(name string, v int) []byte {
	b := appendString(nil, 1, name)
	b = appendVarint(b, 3, int64(v))
	return appendVarint(b, 20, 2)
}

func attrInts(name string, v ...int) []byte {
	b := appendString(nil, 1, name)
	for _, x := range v {
		b = appendVarint(b, 8, int64(x))
	}
	return appendVarint(b, 20, 7)
}

// tensor is a TensorProto: dims 1, data_type 2 (FLOAT 1, INT64 7),
// name 8, raw_data 9 (little-endian).
func tensor(name string, dataType int64, dims []int64, raw []byte) []byte {
	var b []byte
	for _, d := range dims {
		b = appendVarint(b, 1, d)
	}
	b = appendVarint(b, 2, dataType)
	b = appendString(b, 8, name)
	return appendBytes(b, 9, raw)
}

// valueInfo is a ValueInfoProto of a float tensor [batch, n]: name 1,
// type 2 → TypeProto.tensor_type 1 → elem_type 1, shape 2 → dim 1 →
// dim_param 2 (symbolic) or dim_value 1.
func valueInfo(name, batch string, n int) []byte {
	shape := appendBytes(nil, 1, appendString(nil, 2, batch))
	shape = appendBytes(shape, 1, appendVarint(nil, 1, int64(n)))
	t := appendVarint(nil, 1, 1)
	t = appendBytes(t, 2, shape)
	return appendBytes(appendString(nil, 1, name), 2, appendBytes(nil, 1, t))
}
