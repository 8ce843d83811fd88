// Package benchenv describes the machine a benchmark program ran on, for
// the notes of `make bench`'s report.
package benchenv

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// LoadAvg is the machine's 1, 5 and 15 minute load averages and its core
// count, "unknown" where /proc/loadavg cannot be read.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return fmt.Sprintf("%s %s %s (1, 5, 15 min) on %d cores", f[0], f[1], f[2], runtime.NumCPU())
}
