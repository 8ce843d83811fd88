#!/usr/bin/env bash
# example.sh runs examples/blockfile on Beam's Flink job server, the way a
# user runs an sdfio pipeline on Flink: the job server from the jars that
# `make deps` installs, and the SDK workers started as processes of their
# own by Beam Go's boot loader in its worker-pool mode (an EXTERNAL
# environment). README.md's "Running on Flink" quotes it; `make demo` runs
# it, and so does internal/flinktest's TestExampleScript (in `make test`).
#
#   internal/flinktest/example.sh [DIR]   build into DIR (default
#                                         ${TMPDIR:-/tmp}/sdfio-flink-example)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-${TMPDIR:-/tmp}/sdfio-flink-example}"
flink="${SDFIO_FLINK_DIR:-$HOME/.cache/sdfio/flink-job-server-2.62.0-1.19.3}"
mkdir -p "$out"
# free_port, the lock of the worker pool's port, cleanup on exit (pids).
source internal/bootpool/lib.sh
job_port=$(free_port)

# 1. The example, and Beam Go's boot loader.
go build -o "$out/" ./examples/blockfile
go build -o "$out/boot" github.com/apache/beam/sdks/v2/go/container

# 2. The job server: Flink in its own JVM (a MiniCluster), jobs on
#    localhost:$job_port.
setsid java --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED \
	-cp "$flink/lib/*" org.apache.beam.runners.flink.FlinkJobServerDriver \
	--flink-master='[local]' --job-host=localhost --job-port="$job_port" \
	--artifact-port=0 --expansion-port=0 >"$out/job-server.log" 2>&1 &
pids+=($!)

# 3. The worker pool, on localhost:50000 (the boot loader's fixed port):
#    it starts each SDK worker the job server asks for as a process, in
#    its own directory (a worker writes pipeline_options.json there).
(cd "$out" && exec setsid ./boot --worker_pool) >"$out/worker-pool.log" 2>&1 &
pids+=($!)

for i in $(seq 1 120); do
	(exec 3<>"/dev/tcp/localhost/$job_port") 2>/dev/null && (exec 3<>/dev/tcp/localhost/50000) 2>/dev/null && break
	[ "$i" = 120 ] && { echo "the job server or the worker pool did not start:"; tail -n 30 "$out/job-server.log" "$out/worker-pool.log"; exit 1; }
	sleep 0.5
done

# 4. The pipeline, on Flink with parallelism 2, its workers EXTERNAL.
#    Paths are absolute: a worker runs in a directory of its own.
"$out/blockfile" --runner=flink --endpoint="localhost:$job_port" --parallelism=2 \
	--environment_type=EXTERNAL --environment_config=localhost:50000 \
	--worker_binary="$out/blockfile" --input="$PWD/testdata/readings.blk"
