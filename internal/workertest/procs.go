package workertest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessesIn lists the processes (pid and command line) whose working
// directory is dir or below it: what a script that ran its workers there
// left running.
func ProcessesIn(dir string) []string {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+"/")) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, e.Name()+" "+strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return out
}
