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
# free_port, the lock of the worker pool's port, cleanup on exit (pids).
source internal/bootpool/lib.sh
job_port=$(free_port)

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
