package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// InitFromHelp is --init-from's help, the same in every command.
const InitFromHelp = "start from weights saved by PyTorch (a .safetensors state_dict of the same layers; docs/reference/models.md); in a job, their hash is part of it"

// InitFrom reads initial weights for a model of layout l from a
// safetensors file saved by PyTorch
// (safetensors.torch.save_file(model.state_dict(), FILE)): every tensor
// of l, under its name and in its shape (a layered model's names are
// those of an nn.Sequential of the same layers, "0.weight", "0.bias",
// …; conv weights [out, in, kh, kw], dense [out, in]). A tensor missing,
// of another shape or not F32, or one the model lacks, is an error naming
// it. The file is untrusted input: its header and offsets are checked
// before anything is read.
func InitFrom(b []byte, l *Layout) ([]float32, error) {
	shapes, values, _, err := ReadSafetensors(b)
	if err != nil {
		return nil, err
	}
	params := make([]float32, l.Size)
	var missing, extra []string
	for _, t := range l.Tensors {
		got, ok := shapes[t.Name]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s%v", t.Name, t.Shape))
			continue
		}
		if !slices.Equal(got.Shape, t.Shape) {
			return nil, fmt.Errorf("%w: tensor %s is %v in the file, the model needs %v", ErrShape, t.Name, got.Shape, t.Shape)
		}
		copy(params[t.Offset:t.Offset+t.Size()], values[t.Name])
	}
	for name := range shapes {
		if _, ok := l.Lookup(name); !ok {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		return nil, fmt.Errorf("%w: the file lacks %s and has %s the model does not; the model's tensors are %s (an nn.Sequential of the same layers saves these names)",
			ErrShape, listOr(missing), listOr(extra), l)
	}
	for i, v := range params {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%w: parameter %d (%s) is %v", ErrShape, i, tensorAt(l, i), v)
		}
	}
	return params, nil
}

func listOr(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

func tensorAt(l *Layout, i int) string {
	for _, t := range l.Tensors {
		if i >= t.Offset && i < t.Offset+t.Size() {
			return t.Name
		}
	}
	return "?"
}

// ParamsHash is the SHA-256 of a parameter vector's float32 values,
// little-endian, in hex: the initial weights' identity in a job.
func ParamsHash(params []float32) string {
	h := sha256.New()
	buf := make([]byte, 0, 4<<10)
	for _, v := range params {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

// InitFromFile is InitFrom of the file at path for a model of spec;
// errors name the file.
func InitFromFile(path string, spec Spec) ([]float32, error) {
	l, err := LayoutOf(spec)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := InitFrom(b, l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
