package compute

import (
	"bufio"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// CPUModel describes this machine's CPU for benchmark reports: its model
// name and flags (from /proc/cpuinfo where there is one) and core count,
// e.g. "AMD EPYC, 2 cores, AVX-512: yes".
func CPUModel() string {
	name, avx512 := runtime.GOARCH, "no"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			switch k = strings.TrimSpace(k); {
			case !ok:
			case k == "model name" && name == runtime.GOARCH:
				name = strings.TrimSpace(v)
			case k == "flags" && slices.Contains(strings.Fields(v), "avx512f"):
				avx512 = "yes"
			}
		}
	}
	return name + ", " + strconv.Itoa(runtime.NumCPU()) + " cores, AVX-512: " + avx512
}
