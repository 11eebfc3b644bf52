//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Built reports whether this binary has the CUDA loader.
const Built = true

// Driver API attribute numbers (cuda.h, CUdevice_attribute).
const (
	attrCCMajor = 75
	attrCCMinor = 76
)

// driver is the part of the CUDA driver API the probe calls.
type driver struct {
	init          func(flags uint32) int32
	driverVersion func(v *int32) int32
	count         func(n *int32) int32
	get           func(dev *int32, ordinal int32) int32
	name          func(name *byte, n int32, dev int32) int32
	totalMem      func(bytes *uint64, dev int32) int32
	attribute     func(v *int32, attr int32, dev int32) int32
	errorName     func(res int32, s **byte) int32
}

// Probe loads the CUDA driver and lists its devices. A missing library is
// ErrNoLibrary, with the search path in the message; a driver without a
// usable device is ErrNoDevice.
func Probe() (*Info, error) {
	h, where, err := open()
	if err != nil {
		return nil, err
	}
	defer purego.Dlclose(h)
	var d driver
	for _, s := range []struct {
		name string
		fn   any
	}{{"cuInit", &d.init}, {"cuDriverGetVersion", &d.driverVersion}, {"cuDeviceGetCount", &d.count},
		{"cuDeviceGet", &d.get}, {"cuDeviceGetName", &d.name}, {"cuDeviceTotalMem_v2", &d.totalMem},
		{"cuDeviceGetAttribute", &d.attribute}, {"cuGetErrorName", &d.errorName}} {
		if _, err := purego.Dlsym(h, s.name); err != nil {
			return nil, fmt.Errorf("%w: %s has no %s: is it the NVIDIA driver's?", ErrNoLibrary, where, s.name)
		}
		purego.RegisterLibFunc(s.fn, h, s.name)
	}
	check := func(call string, res int32) error {
		if res == 0 {
			return nil
		}
		err := fmt.Errorf("cuda: %s: %s (%d)", call, d.errName(res), res)
		if res == 100 { // CUDA_ERROR_NO_DEVICE
			err = fmt.Errorf("%w: %s: %s (%d) from %s", ErrNoDevice, call, d.errName(res), res, where)
		}
		return err
	}
	if err := check("cuInit", d.init(0)); err != nil {
		return nil, err
	}
	info := &Info{Library: where}
	var g graphAPI
	if name := missing(h, g.symbols()); name != "" {
		info.NoGraphs = fmt.Sprintf("%s has no %s", where, name)
	}
	var v, n int32
	if err := check("cuDriverGetVersion", d.driverVersion(&v)); err != nil {
		return nil, err
	}
	if err := check("cuDeviceGetCount", d.count(&n)); err != nil {
		return nil, err
	}
	info.DriverVersion = int(v)
	if n == 0 {
		return nil, fmt.Errorf("%w: the driver in %s reports none", ErrNoDevice, where)
	}
	for i := range n {
		var dev, major, minor int32
		var mem uint64
		name := make([]byte, 256)
		if err := errors.Join(check("cuDeviceGet", d.get(&dev, i)),
			check("cuDeviceGetName", d.name(&name[0], int32(len(name)), dev)),
			check("cuDeviceTotalMem", d.totalMem(&mem, dev)),
			check("cuDeviceGetAttribute", d.attribute(&major, attrCCMajor, dev)),
			check("cuDeviceGetAttribute", d.attribute(&minor, attrCCMinor, dev))); err != nil {
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
		if z := indexZero(name); z >= 0 {
			name = name[:z]
		}
		info.Devices = append(info.Devices, Device{Index: int(i), Name: string(name), Memory: mem, Major: int(major), Minor: int(minor)})
	}
	return info, nil
}

func indexZero(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// errName is the driver's name for a result code.
func (d *driver) errName(res int32) string {
	var s *byte
	if d.errorName(res, &s) != 0 || s == nil {
		return "unknown error"
	}
	var out []byte
	for p := unsafe.Pointer(s); *(*byte)(p) != 0 && len(out) < 128; p = unsafe.Add(p, 1) {
		out = append(out, *(*byte)(p))
	}
	return string(out)
}

// open loads libcuda.so.1 from $GOSSIPD_CUDA_DIR, then from the system's
// search path.
func open() (uintptr, string, error) {
	var tried string
	if dir := os.Getenv(DirEnv); dir != "" {
		p := filepath.Join(dir, Library)
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			return h, p, nil
		}
		tried = fmt.Sprintf("%s (%v), then ", p, err)
	}
	h, err := purego.Dlopen(Library, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err == nil {
		return h, Library, nil
	}
	ld := os.Getenv("LD_LIBRARY_PATH")
	if ld == "" {
		ld = "unset"
	}
	return 0, "", fmt.Errorf("%w: the NVIDIA driver's %s: tried %sthe system's search path: $LD_LIBRARY_PATH (%s), the ld.so cache (/etc/ld.so.cache), /lib and /usr/lib (%v); is the NVIDIA driver installed (nvidia-smi)? $%s names another directory",
		ErrNoLibrary, Library, tried, ld, err, DirEnv)
}
