# lib.sh: what internal/flinktest/example.sh and internal/prismexample/example.sh
# share around Beam Go's boot loader (sourced from the module's root, after
# `set -euo pipefail`). It defines free_port, takes the lock of the boot
# loader's worker-pool port, and sets a cleanup that runs on exit: it kills
# the process group of every pid the script appends to pids (each service
# started with setsid), and removes what the run added under /tmp.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("localhost",0)); print(s.getsockname()[1])'; }

# The boot loader's worker pool listens on port 50000, always: one at a
# time on this machine. Not under $TMPDIR: each test binary has its own.
exec 9>/tmp/sdfio-boot-50000.lock
flock 9
# The lock's last holder may have released it with its pool still
# shutting down (a CI run once found the port taken right after taking the
# lock): wait up to a minute for the port, then name what holds it.
for i in $(seq 1 120); do
	(exec 3<>/dev/tcp/localhost/50000) 2>/dev/null || break
	if [ "$i" = 120 ]; then
		echo "port 50000, the boot loader's worker pool's, is still in use after a minute:" >&2
		(ss -ltnp 2>/dev/null || true) | grep ':50000 ' >&2 || true
		exit 1
	fi
	sleep 0.5
done

# The boot loader copies each worker binary to /tmp/bin*/ and stages
# artifacts in /tmp/staged, and leaves both: what this run adds goes at
# the end.
before=$(ls -d /tmp/bin* /tmp/staged 2>/dev/null || true)
pids=()
# Each service runs in a process group of its own (setsid), and goes with
# everything it started: the boot loader leaves each SDK worker it starts
# running after the job, its pool and the runner are gone (seen with Prism
# and with Flink: workers of finished jobs, parented to init, for hours).
cleanup() {
	for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for d in $(ls -d /tmp/bin* /tmp/staged 2>/dev/null || true); do
		grep -qxF "$d" <<<"$before" || rm -rf "$d"
	done
}
trap cleanup EXIT
