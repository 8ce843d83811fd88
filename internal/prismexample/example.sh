#!/usr/bin/env bash
# example.sh runs examples/blockfile on a standalone Prism job server with
# its SDK workers as processes of their own, the two ways a user can have
# them: EXTERNAL, a worker pool that Beam Go's boot loader runs and that
# starts a worker per request, and PROCESS, a command that Prism runs per
# worker. README.md's "Workers as separate processes" quotes it, and
# internal/prismexample's TestExampleScript runs both modes in `make test`.
#
#   internal/prismexample/example.sh external|process [DIR]
#       build into DIR (default ${TMPDIR:-/tmp}/sdfio-prism-example)
set -euo pipefail
cd "$(dirname "$0")/../.."
mode="${1:?external or process}"
out="${2:-${TMPDIR:-/tmp}/sdfio-prism-example}"
mkdir -p "$out"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("localhost",0)); print(s.getsockname()[1])'; }
job_port=$(free_port)
# The boot loader's worker pool listens on port 50000, always: one at a
# time on this machine (internal/flinktest/example.sh takes the same lock).
exec 9>/tmp/sdfio-boot-50000.lock # not $TMPDIR: each test binary has its own
flock 9
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

# 1. The example, Beam Go's boot loader and Prism, at the module's Beam.
go build -o "$out/" ./examples/blockfile
go build -o "$out/boot" github.com/apache/beam/sdks/v2/go/container
go build -o "$out/prism" github.com/apache/beam/sdks/v2/go/cmd/prism

# 2. Prism, jobs on localhost:$job_port, no web UI.
setsid "$out/prism" --job_port="$job_port" --serve_http=false >"$out/prism.log" 2>&1 &
pids+=($!)

case "$mode" in
external)
	# 3. The worker pool on localhost:50000: it starts each SDK worker
	#    Prism asks for as a process, in its own directory.
	(cd "$out" && exec setsid ./boot --worker_pool) >"$out/worker-pool.log" 2>&1 &
	pids+=($!)
	env=(--environment_type=EXTERNAL --environment_config=localhost:50000)
	;;
process)
	# 3. Prism runs the command for each worker with --id='<id>': the id
	#    in literal quotes (Prism v2.78, environments.go: no shell removes
	#    them), which the boot loader would send back as the worker's id
	#    and Prism refuse. This wrapper takes them off.
	cat >"$out/worker.sh" <<WRAP
#!/usr/bin/env bash
args=()
for a in "\$@"; do
	case "\$a" in --id=\'*\') a="--id=\${a:6:\${#a}-7}" ;; esac
	args+=("\$a")
done
cd "$out" && exec ./boot "\${args[@]}"
WRAP
	chmod +x "$out/worker.sh"
	env=(--environment_type=PROCESS --environment_config="{\"command\": \"$out/worker.sh\"}")
	;;
*) echo "example.sh: the mode is external or process, not $mode" >&2; exit 2 ;;
esac

for i in $(seq 1 120); do
	(exec 3<>"/dev/tcp/localhost/$job_port") 2>/dev/null &&
		{ [ "$mode" != external ] || (exec 3<>/dev/tcp/localhost/50000) 2>/dev/null; } && break
	[ "$i" = 120 ] && { echo "Prism or the worker pool did not start:"; tail -n 30 "$out"/*.log; exit 1; }
	sleep 0.5
done

# 4. The pipeline on Prism, its workers separate processes. Paths are
#    absolute: a worker runs in a directory of its own.
"$out/blockfile" --runner=universal --endpoint="localhost:$job_port" \
	"${env[@]}" --worker_binary="$out/blockfile" --input="$PWD/testdata/readings.blk"
