// Package setup holds deps.sh, which `make deps` runs to install what the
// tests and the demo need, and its tests: the script's decisions in a dry
// run, with PATH and the places it looks in arranged so that Java, gcloud
// and the emulator are found or not.
package setup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// machine is a PATH of the basic tools deps.sh uses and the stubs a case
// gives, and the places the script looks in, all in a temporary directory.
type machine struct {
	t                      *testing.T
	dir, bin, aptEtc, home string
	env                    map[string]string
}

func newMachine(t *testing.T) *machine {
	d := t.TempDir()
	m := &machine{t: t, dir: d, bin: filepath.Join(d, "bin"), aptEtc: filepath.Join(d, "etc-apt"), home: filepath.Join(d, "home"), env: map[string]string{}}
	for _, p := range []string{m.bin, filepath.Join(m.aptEtc, "sources.list.d"), m.home} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"bash", "sh", "id", "readlink", "grep", "tail", "cat", "tr", "mkdir", "env", "rm", "sed", "ls", "wc", "sha256sum", "pwd"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s is not on PATH: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(m.bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing is found in the usual places unless a case puts it there.
	m.env["SDFIO_SDK_ROOTS"] = filepath.Join(d, "no-sdk")
	m.env["PYTHON3"] = filepath.Join(d, "no-python3")
	m.env["SDFIO_AVSC_DIR"] = filepath.Join(d, "avsc")
	m.env["DRY_RUN"] = "1"
	m.env["SDFIO_FLINK_DIR"] = filepath.Join(d, "flink")
	return m
}

// stub puts an executable script named name on the machine's PATH.
func (m *machine) stub(name, script string) {
	m.t.Helper()
	if err := os.WriteFile(filepath.Join(m.bin, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		m.t.Fatal(err)
	}
}

// file writes a file under the machine's directory and returns its path.
func (m *machine) file(rel, content string) string {
	m.t.Helper()
	p := filepath.Join(m.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
	return p
}

// run runs deps.sh (in a dry run unless the case sets DRY_RUN to "") and returns its stdout, stderr and whether
// it succeeded.
func (m *machine) run(args ...string) (stdout, stderr string, ok bool) {
	m.t.Helper()
	cmd := exec.Command("/bin/bash", append([]string{"deps.sh"}, args...)...)
	cmd.Env = []string{"PATH=" + m.bin, "HOME=" + m.home, "APT_ETC=" + m.aptEtc,
		"KEYRINGS=" + filepath.Join(m.dir, "keyrings"), "TMPDIR=" + m.dir}
	for k, v := range m.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		m.t.Fatal(err)
	}
	return out.String(), errb.String(), err == nil
}

// mustRun is run, failing the test unless deps.sh succeeds.
func (m *machine) mustRun() string {
	m.t.Helper()
	out, errOut, ok := m.run()
	if !ok {
		m.t.Fatalf("failed: %s\n%s", out, errOut)
	}
	return out
}

// says fails t unless out has every line of want, in order (each a
// substring of one line).
func says(t *testing.T, out string, want ...string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		for i < len(lines) && !strings.Contains(lines[i], w) {
			i++
		}
		if i == len(lines) {
			t.Fatalf("output does not say %q (in this order after the lines before it):\n%s", w, out)
		}
		i++
	}
}

func notSays(t *testing.T, out string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(out, b) {
			t.Errorf("output says %q:\n%s", b, out)
		}
	}
}

const emulatorJar = "platform/cloud-datastore-emulator/CloudDatastore.jar"

// TestPlainDebian: no Java, no gcloud, no emulator, no Google apt source:
// deps installs default-jre-headless from Debian, adds Google's source and
// key, updates again and installs google-cloud-cli and its emulator
// package, one line per tool. (Before: nothing installed Java or the
// emulator.)
func TestPlainDebian(t *testing.T) {
	m := newMachine(t)
	m.stub("apt-get", "exit 99") // a dry run never calls it
	out := m.mustRun()
	keyring := filepath.Join(m.dir, "keyrings", "cloud.google.gpg")
	says(t, out,
		"java:                        installing (Debian package default-jre-headless)",
		"would run: apt-get update -q",
		"would run: env DEBIAN_FRONTEND=noninteractive apt-get install -y -q avro-bin python3-avro python3-snappy python3-zstandard default-jre-headless",
		"Cloud Datastore emulator:    installing (google-cloud-cli google-cloud-cli-datastore-emulator, adding Google's Cloud SDK apt repository and its key)",
		"would run: env DEBIAN_FRONTEND=noninteractive apt-get install -y -q curl gnupg",
		"would run: bash -c set -o pipefail; curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | gpg --dearmor --yes -o "+keyring,
		"would run: bash -c echo 'deb [signed-by="+keyring+"] https://packages.cloud.google.com/apt cloud-sdk main' >"+m.aptEtc+"/sources.list.d/google-cloud-sdk.list",
		"would run: apt-get update -q",
		"would run: env DEBIAN_FRONTEND=noninteractive apt-get install -y -q google-cloud-cli google-cloud-cli-datastore-emulator",
		"avsc:                        installing")
	notSays(t, out, "gcloud components")
}

// TestGoogleSourcePresent: Google's source list is there (and its key):
// only the packages are installed, after one apt-get update.
func TestGoogleSourcePresent(t *testing.T) {
	m := newMachine(t)
	m.stub("apt-get", "exit 99")
	m.file("etc-apt/sources.list.d/gcloud.sources", "Types: deb\nURIs: https://packages.cloud.google.com/apt\nSuites: cloud-sdk\n")
	out := m.mustRun()
	says(t, out, "Cloud Datastore emulator:    installing (google-cloud-cli google-cloud-cli-datastore-emulator from Google's Cloud SDK apt repository)",
		"would run: env DEBIAN_FRONTEND=noninteractive apt-get install -y -q google-cloud-cli google-cloud-cli-datastore-emulator")
	notSays(t, out, "gpg --dearmor", "sources.list.d/google-cloud-sdk.list")
	if n := strings.Count(out, "apt-get update"); n != 1 {
		t.Errorf("%d apt-get updates, want 1:\n%s", n, out)
	}
}

// TestGcloudWithoutComponent: a gcloud not installed by apt whose SDK has
// no emulator: its own root (asked only because no usual root exists) is
// searched, then the component is installed with gcloud.
func TestGcloudWithoutComponent(t *testing.T) {
	m := newMachine(t)
	m.env["SDFIO_SDK_ROOTS"] = ""
	root := filepath.Join(m.dir, "gcloud-sdk")
	m.file("gcloud-sdk/bin/.keep", "")
	m.stub("gcloud", `[ "$1" = info ] && echo `+root+`; exit 0`)
	m.stub("dpkg", "exit 1") // not a Debian package's file
	m.stub("apt-get", "exit 99")
	out := m.mustRun()
	says(t, out, "Cloud Datastore emulator:    installing (gcloud components install cloud-datastore-emulator)",
		"would run: "+filepath.Join(m.bin, "gcloud")+" components install cloud-datastore-emulator --quiet")
	notSays(t, out, "google-cloud-cli")

	// With the component in gcloud's root, it is found there.
	jar := m.file("gcloud-sdk/"+emulatorJar, "")
	out, _, _ = m.run()
	says(t, out, "Cloud Datastore emulator:    found "+jar)
}

// TestGcloudFromApt: gcloud from Debian's package manager (its component
// manager is off): the emulator's Debian package is installed.
func TestGcloudFromApt(t *testing.T) {
	m := newMachine(t)
	m.stub("gcloud", "exit 0")
	m.stub("dpkg", `echo "google-cloud-cli: $2"`)
	m.stub("apt-get", "exit 99")
	m.file("etc-apt/sources.list.d/google-cloud-sdk.list", "deb [signed-by=/usr/share/keyrings/cloud.google.gpg] https://packages.cloud.google.com/apt cloud-sdk main\n")
	out := m.mustRun()
	says(t, out, "installing (google-cloud-cli-datastore-emulator from Google's Cloud SDK apt repository)",
		"apt-get install -y -q google-cloud-cli-datastore-emulator")
	notSays(t, out, "gcloud components", "install -y -q google-cloud-cli google-cloud-cli-datastore-emulator")
}

// TestNoWayToInstall: neither gcloud nor apt-get: deps fails with the
// exact commands of both ways.
func TestNoWayToInstall(t *testing.T) {
	m := newMachine(t)
	m.env["JAVA"] = "/usr/bin/java-of-the-test"
	m.stub("avrocat", "exit 0")
	m.stub("avromod", "exit 0")
	m.env["PYTHON3"] = filepath.Join(m.bin, "python3")
	m.stub("python3", "exit 0")
	out, errOut, ok := m.run()
	if ok {
		t.Fatalf("succeeded: %s", out)
	}
	says(t, out, "java:                        found /usr/bin/java-of-the-test")
	says(t, errOut, "the Cloud Datastore emulator is not installed and could not be installed here (neither gcloud nor apt-get is on PATH)",
		"sudo apt-get install -y ca-certificates curl gnupg",
		"curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo gpg --dearmor -o /usr/share/keyrings/cloud.google.gpg",
		`echo "deb [signed-by=/usr/share/keyrings/cloud.google.gpg] https://packages.cloud.google.com/apt cloud-sdk main" | sudo tee /etc/apt/sources.list.d/google-cloud-sdk.list`,
		"sudo apt-get update && sudo apt-get install -y google-cloud-cli google-cloud-cli-datastore-emulator",
		"gcloud components install cloud-datastore-emulator")
}

// TestAllFound: Java on PATH and the emulator under CLOUDSDK_ROOT_DIR, the
// Python modules and avsc there: one "found" line per tool, nothing run.
func TestAllFound(t *testing.T) {
	m := newMachine(t)
	m.stub("java", "exit 0")
	m.stub("avrocat", "exit 0")
	m.stub("avromod", "exit 0")
	m.stub("apt-get", "exit 99")
	m.env["PYTHON3"] = filepath.Join(m.bin, "python3")
	m.stub("python3", "exit 0")
	m.env["CLOUDSDK_ROOT_DIR"] = filepath.Join(m.dir, "sdk")
	jar := m.file("sdk/"+emulatorJar, "")
	m.file("avsc/node_modules/avsc/package.json", "{}")
	// The Flink job server's jars, checked against a sums file of their own.
	m.file("flink/lib/a.jar", "a\n")
	m.file("flink/lib/b.jar", "b\n")
	m.env["SDFIO_FLINK_SUMS"] = m.file("sums",
		"87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7  a.jar\n"+
			"0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f  b.jar\n")
	out := m.mustRun()
	says(t, out, "avro-bin:", "python3-avro:", "python3-snappy:", "python3-zstandard:",
		"java:                        found "+filepath.Join(m.bin, "java"),
		"Cloud Datastore emulator:    found "+jar, "avsc:",
		"Flink job server:            found "+filepath.Join(m.dir, "flink"))
	if n := strings.Count(out, "\n"); n != 8 || strings.Count(out, " found ") != 8 {
		t.Errorf("want 8 lines, each found:\n%s", out)
	}
	notSays(t, out, "would run", "installing")
}

// TestFlinkJarsChecked: a cached Flink job server whose jars do not match
// the pinned checksums (one changed, or one more) is fetched again, with
// Maven installed first when it is missing.
func TestFlinkJarsChecked(t *testing.T) {
	for name, extra := range map[string]string{"changed": "a.jar", "one more": "c.jar"} {
		t.Run(name, func(t *testing.T) {
			m := newMachine(t)
			m.stub("apt-get", "exit 0")
			m.file("flink/lib/a.jar", "a\n")
			m.file("flink/lib/"+extra, "changed\n")
			m.env["SDFIO_FLINK_SUMS"] = m.file("sums",
				"87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7  a.jar\n")
			out := m.mustRun()
			says(t, out, "Flink job server:            installing (Beam 2.62.0, Flink 1.19.3",
				"would run: env DEBIAN_FRONTEND=noninteractive apt-get install -y -q maven",
				"would run: mvn -B -q -f ")
		})
	}
}

// TestFailedInstallRemovesAddedSource: a real (not dry) run where Google's
// repository does not serve the packages (as on a machine that reaches
// Debian's mirrors only): the installers' output stays in the log, shown
// with the failure, and the source list the run added is removed, so that
// later apt-get updates of the machine are not broken by it.
func TestFailedInstallRemovesAddedSource(t *testing.T) {
	m := newMachine(t)
	m.stub("java", "exit 0")
	m.stub("avrocat", "exit 0")
	m.stub("avromod", "exit 0")
	m.env["PYTHON3"] = filepath.Join(m.bin, "python3")
	m.stub("python3", "exit 0")
	m.file("avsc/node_modules/avsc/package.json", "{}")
	m.stub("apt-get", `echo "dpkg chatter of apt-get $*"; case "$*" in *google-cloud-cli*) echo "E: Unable to locate package google-cloud-cli"; exit 100;; esac`)
	m.stub("curl", "echo key")
	m.stub("gpg", "cat >/dev/null; exit 0") // reads its input, as gpg does: curl must not die of SIGPIPE
	m.env["DRY_RUN"] = ""
	out, errOut, ok := m.run()
	if ok {
		t.Fatalf("succeeded: %s", out)
	}
	notSays(t, out, "dpkg chatter")
	list := filepath.Join(m.aptEtc, "sources.list.d", "google-cloud-sdk.list")
	says(t, errOut, "make deps: removed "+list+", which it had added",
		"(apt-get install google-cloud-cli google-cloud-cli-datastore-emulator failed)",
		"--- the last lines of "+filepath.Join(m.dir, "sdfio-deps.log"),
		"dpkg chatter of apt-get install -y -q google-cloud-cli google-cloud-cli-datastore-emulator",
		"E: Unable to locate package google-cloud-cli")
	if _, err := os.Stat(list); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", list, err)
	}
}

// TestNotRoot: a user who is neither root nor has sudo, on a machine that
// lacks Debian packages, Maven, npm and the emulator: deps does what needs
// no root, runs no apt-get, and fails with one line of why and the exact
// commands to run as root. (Before: it ran apt-get and failed on apt's lock
// file.)
func TestNotRoot(t *testing.T) {
	m := newMachine(t)
	if err := os.Remove(filepath.Join(m.bin, "id")); err != nil {
		t.Fatal(err)
	}
	m.stub("id", `case "$1" in -u) echo 1000 ;; -un) echo alice ;; *) echo "uid=1000(alice)" ;; esac`)
	m.stub("apt-get", "echo apt-get was run >&2; exit 99")
	m.env["DRY_RUN"] = ""
	out, errOut, ok := m.run()
	if ok {
		t.Fatalf("succeeded: %s", out)
	}
	notSays(t, errOut, "apt-get was run", "sudo apt", "| sudo")
	says(t, out, "avro-bin:                    installing", "java:                        installing",
		"Cloud Datastore emulator:    installing (google-cloud-cli google-cloud-cli-datastore-emulator from Google's Cloud SDK apt repository: needs root)",
		"Flink job server:            installing")
	says(t, errOut,
		"make deps: alice is neither root nor has sudo, and avro-bin python3-avro python3-snappy python3-zstandard default-jre-headless google-cloud-cli google-cloud-cli-datastore-emulator nodejs npm maven come from apt; run as root, then make deps again:",
		"  apt-get update && apt-get install -y ca-certificates curl gnupg",
		"  curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | gpg --dearmor -o /usr/share/keyrings/cloud.google.gpg",
		`  echo "deb [signed-by=/usr/share/keyrings/cloud.google.gpg] https://packages.cloud.google.com/apt cloud-sdk main" >/etc/apt/sources.list.d/google-cloud-sdk.list`,
		"  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y avro-bin python3-avro python3-snappy python3-zstandard default-jre-headless google-cloud-cli google-cloud-cli-datastore-emulator nodejs npm maven")
	if n := strings.Count(strings.TrimSpace(errOut), "\n") + 1; n != 5 {
		t.Errorf("want the why line and 4 commands on stderr, got %d lines:\n%s", n, errOut)
	}
}
