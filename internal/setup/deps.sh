#!/usr/bin/env bash
# deps.sh installs what sdfio's tests and demo need when it is missing, on
# Debian (`make deps` runs it; `make test` and `make demo` run that), and
# prints one line per tool: what it found, or what it installs. The output
# of apt-get, npm and gcloud goes to a log ($SDFIO_DEPS_LOG, by default
# ${TMPDIR:-/tmp}/sdfio-deps.log), shown only when a step fails. It never
# removes anything.
#
#   deps.sh                    check, and install what is missing
#   DRY_RUN=1 deps.sh          check, and print the commands it would run
#   deps.sh --locate-emulator  print the Cloud Datastore emulator's jar, as
#                              datastoreio/dstest finds it (exit 1: none)
#   deps.sh --sdk-roots        print the Cloud SDK roots it looks in
#
# The tools: avro-bin, python3-avro, python3-snappy, python3-zstandard
# (Debian's python3, $PYTHON3), Java (default-jre-headless; $JAVA or java on
# PATH, as dstest looks), the Cloud Datastore emulator (found where dstest
# looks: platform/cloud-datastore-emulator/CloudDatastore.jar under
# $CLOUDSDK_ROOT_DIR or the usual Cloud SDK roots, else gcloud's own root;
# installed from Google's Cloud SDK apt repository, whose source list and
# signing key are added when missing, or with `gcloud components install`
# when gcloud was not installed by apt) and avsc (npm).
#
# For tests: SDFIO_SDK_ROOTS replaces the usual roots, APT_ETC (/etc/apt)
# and KEYRINGS (/usr/share/keyrings) where apt sources and keys are looked
# for and written.
set -uo pipefail

PYTHON3="${PYTHON3:-/usr/bin/python3}"
APT_ETC="${APT_ETC:-/etc/apt}"
KEYRINGS="${KEYRINGS:-/usr/share/keyrings}"
LOG="${SDFIO_DEPS_LOG:-${TMPDIR:-/tmp}/sdfio-deps.log}"
DRY="${DRY_RUN:-}"
GOOGLE_APT="https://packages.cloud.google.com/apt"
GOOGLE_KEY="$KEYRINGS/cloud.google.gpg"

# The Cloud SDK roots, in datastoreio/dstest's order (sdkRoots in
# dstest.go; a test of dstest checks the two agree).
sdk_roots() {
	[ -n "${CLOUDSDK_ROOT_DIR:-}" ] && echo "$CLOUDSDK_ROOT_DIR"
	if [ -n "${SDFIO_SDK_ROOTS+set}" ]; then
		local r
		for r in $SDFIO_SDK_ROOTS; do echo "$r"; done
	else
		echo /usr/lib/google-cloud-sdk
		echo /usr/share/google-cloud-sdk
		echo /opt/google-cloud-sdk
		[ -n "${HOME:-}" ] && echo "$HOME/google-cloud-sdk"
	fi
}

# locate_emulator prints the emulator's jar, looking where dstest looks:
# the roots above, then (only when none of them exists) gcloud's root.
locate_emulator() {
	local roots r any=""
	roots=$(sdk_roots)
	for r in $roots; do [ -e "$r" ] && any=1; done
	if [ -z "$any" ] && command -v gcloud >/dev/null 2>&1; then
		r=$(gcloud info --format='value(installation.sdk_root)' 2>/dev/null) && [ -n "$r" ] && roots="$roots"$'\n'"$r"
	fi
	for r in $roots; do
		if [ -f "$r/platform/cloud-datastore-emulator/CloudDatastore.jar" ]; then
			echo "$r/platform/cloud-datastore-emulator/CloudDatastore.jar"
			return 0
		fi
	done
	return 1
}

case "${1:-}" in
--locate-emulator) locate_emulator; exit ;;
--sdk-roots) sdk_roots; exit 0 ;;
"") ;;
*) echo "deps.sh: unknown argument $1 (see the comment at its top)" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
# Without root and without sudo nothing can come from apt: what would is
# gathered (root_pkgs, root_google) and printed at the end as the commands
# to run as root, and deps fails; what needs no root is still done.
ROOT=1
[ "$(id -u)" = 0 ] || [ -n "$SUDO" ] || ROOT=""
root_pkgs=()
root_google=""
[ -n "$DRY" ] || : >"$LOG"

# run runs a command with its output to the log (in a dry run it prints
# the command instead).
run() {
	if [ -n "$DRY" ]; then
		echo "    would run: $*"
		return 0
	fi
	echo "+ $*" >>"$LOG"
	"$@" >>"$LOG" 2>&1
}

# fail says what failed, shows the end of the log and exits.
fail() {
	echo "make deps: $1" >&2
	if [ -z "$DRY" ] && [ -s "$LOG" ]; then
		echo "--- the last lines of $LOG:" >&2
		tail -n 30 "$LOG" >&2
	fi
	exit 1
}

apt_updated=""
apt_install() {
	command -v apt-get >/dev/null 2>&1 || return 1
	if [ -z "$apt_updated" ]; then
		run $SUDO apt-get update -q || return 1
		apt_updated=1
	fi
	run $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# missing lists the Debian packages to install, together, below.
missing=()
found() { printf '%-28s found %s\n' "$1:" "$2"; }
installing() { printf '%-28s installing %s\n' "$1:" "$2"; }

if command -v avrocat >/dev/null 2>&1 && command -v avromod >/dev/null 2>&1; then
	found avro-bin "$(command -v avrocat), avromod"
else
	installing avro-bin "(Debian package avro-bin)"
	missing+=(avro-bin)
fi
for m in avro:python3-avro snappy:python3-snappy zstandard:python3-zstandard; do
	if [ -x "$PYTHON3" ] && "$PYTHON3" -c "import ${m%%:*}" >/dev/null 2>&1; then
		found "${m##*:}" "($PYTHON3 imports ${m%%:*})"
	else
		installing "${m##*:}" "(Debian package ${m##*:})"
		missing+=("${m##*:}")
	fi
done
java="${JAVA:-}"
[ -n "$java" ] || java=$(command -v java 2>/dev/null)
if [ -n "$java" ]; then
	found java "$java"
else
	installing java "(Debian package default-jre-headless)"
	missing+=(default-jre-headless)
fi
if [ ${#missing[@]} -gt 0 ]; then
	command -v apt-get >/dev/null 2>&1 || fail "no apt-get on PATH: install ${missing[*]} (Debian package names) and run make again"
	if [ -n "$ROOT" ]; then
		apt_install "${missing[@]}" || fail "apt-get install ${missing[*]} failed"
	else
		root_pkgs+=("${missing[@]}")
	fi
fi

# The Cloud Datastore emulator.
added_source=""
emulator_help() {
	# A source list this run added, that did not serve the packages, would
	# break every later apt-get update of the machine: it goes.
	if [ -n "$added_source" ] && [ -z "$DRY" ]; then
		run $SUDO rm -f "$added_source"
		echo "make deps: removed $added_source, which it had added" >&2
	fi
	cat >&2 <<HELP
make deps: the Cloud Datastore emulator is not installed and could not be installed here ($1).
Install it with Google's Cloud SDK apt repository (Debian, Ubuntu):
  sudo apt-get install -y ca-certificates curl gnupg
  curl -fsSL $GOOGLE_APT/doc/apt-key.gpg | sudo gpg --dearmor -o /usr/share/keyrings/cloud.google.gpg
  echo "deb [signed-by=/usr/share/keyrings/cloud.google.gpg] $GOOGLE_APT cloud-sdk main" | sudo tee /etc/apt/sources.list.d/google-cloud-sdk.list
  sudo apt-get update && sudo apt-get install -y google-cloud-cli google-cloud-cli-datastore-emulator
or, with a gcloud installed from Google's archive (not from apt):
  gcloud components install cloud-datastore-emulator
or point CLOUDSDK_ROOT_DIR at a Cloud SDK that has platform/cloud-datastore-emulator/CloudDatastore.jar;
then run make again.
HELP
	if [ -z "$DRY" ] && [ -s "$LOG" ]; then
		echo "--- the last lines of $LOG:" >&2
		tail -n 30 "$LOG" >&2
	fi
	exit 1
}

# google_source reports whether apt has Google's Cloud SDK repository.
google_source() {
	grep -qs "$GOOGLE_APT" "$APT_ETC/sources.list" "$APT_ETC"/sources.list.d/*.list "$APT_ETC"/sources.list.d/*.sources
}

# add_google_source adds Google's repository and signing key to apt.
add_google_source() {
	if [ ! -s "$GOOGLE_KEY" ]; then
		local tools=()
		command -v curl >/dev/null 2>&1 || tools+=(curl)
		command -v gpg >/dev/null 2>&1 || tools+=(gnupg)
		[ -e /etc/ssl/certs/ca-certificates.crt ] || tools+=(ca-certificates)
		if [ ${#tools[@]} -gt 0 ]; then apt_install "${tools[@]}" || return 1; fi
		run $SUDO bash -c "set -o pipefail; curl -fsSL $GOOGLE_APT/doc/apt-key.gpg | gpg --dearmor --yes -o $GOOGLE_KEY" || return 1
	fi
	added_source="$APT_ETC/sources.list.d/google-cloud-sdk.list"
	run $SUDO bash -c "echo 'deb [signed-by=$GOOGLE_KEY] $GOOGLE_APT cloud-sdk main' >$added_source" || return 1
	apt_updated="" # the new source needs an update
}

if jar=$(locate_emulator); then
	found "Cloud Datastore emulator" "$jar"
else
	gcloud=$(command -v gcloud 2>/dev/null)
	if [ -n "$gcloud" ] && ! dpkg -S "$(readlink -f "$gcloud")" >/dev/null 2>&1; then
		installing "Cloud Datastore emulator" "(gcloud components install cloud-datastore-emulator)"
		run "$gcloud" components install cloud-datastore-emulator --quiet ||
			emulator_help "gcloud components install cloud-datastore-emulator failed"
	elif command -v apt-get >/dev/null 2>&1 && [ -z "$ROOT" ]; then
		pkgs=(google-cloud-cli-datastore-emulator)
		[ -n "$gcloud" ] || pkgs=(google-cloud-cli google-cloud-cli-datastore-emulator)
		installing "Cloud Datastore emulator" "(${pkgs[*]} from Google's Cloud SDK apt repository: needs root)"
		google_source || root_google=1
		root_pkgs+=("${pkgs[@]}")
	elif command -v apt-get >/dev/null 2>&1; then
		pkgs=(google-cloud-cli-datastore-emulator)
		[ -n "$gcloud" ] || pkgs=(google-cloud-cli google-cloud-cli-datastore-emulator)
		if google_source; then
			installing "Cloud Datastore emulator" "(${pkgs[*]} from Google's Cloud SDK apt repository)"
		else
			installing "Cloud Datastore emulator" "(${pkgs[*]}, adding Google's Cloud SDK apt repository and its key)"
			add_google_source || emulator_help "adding Google's apt repository failed"
		fi
		apt_install "${pkgs[@]}" || emulator_help "apt-get install ${pkgs[*]} failed"
	else
		emulator_help "neither gcloud nor apt-get is on PATH"
	fi
	if [ -z "$DRY" ] && [ -n "$ROOT" ]; then
		jar=$(locate_emulator) || emulator_help "installed, but no CloudDatastore.jar where datastoreio/dstest looks: $(sdk_roots | tr '\n' ' ')"
	fi
fi

# avsc, a third Avro writer for the tests (npm).
avsc="${SDFIO_AVSC_DIR:-$HOME/.cache/sdfio/avsc}"
if [ -f "$avsc/node_modules/avsc/package.json" ]; then
	found avsc "$avsc"
else
	installing avsc "(npm install avsc@5.7.9 into $avsc)"
	if ! command -v npm >/dev/null 2>&1 && [ -z "$ROOT" ]; then
		root_pkgs+=(nodejs npm) # avsc then comes with the next make deps
	else
		if ! command -v npm >/dev/null 2>&1; then
			apt_install nodejs npm || fail "apt-get install nodejs npm failed"
		fi
		run mkdir -p "$avsc" && run npm install --prefix "$avsc" --no-audit --no-fund --silent avsc@5.7.9 ||
			fail "npm install avsc@5.7.9 failed"
	fi
fi

# Beam's Flink job server: the runner and its jars from Maven Central, as
# pinned by flink/pom.xml beside this script (Beam and Flink versions, and
# why), each jar checked against flink/jars.sha256, into a cache directory
# that internal/flinktest finds the same way ($SDFIO_FLINK_DIR, else
# $HOME/.cache/sdfio/flink-job-server-<beam>-<flink>). SDFIO_FLINK_SUMS
# replaces the checksum file (for the tests of this script). The copy goes to a
# new directory that replaces the old one only once every checksum holds.
here="${BASH_SOURCE[0]%/*}"
[ "$here" != "${BASH_SOURCE[0]}" ] || here=.
here="$(cd "$here" && pwd)"
flink_pom="$here/flink/pom.xml"
flink_sums="${SDFIO_FLINK_SUMS:-$here/flink/jars.sha256}"
beam_v=$(sed -n 's:.*<beam.version>\(.*\)</beam.version>.*:\1:p' "$flink_pom")
flink_v=$(sed -n 's:.*<flink.version>\(.*\)</flink.version>.*:\1:p' "$flink_pom")
flink_dir="${SDFIO_FLINK_DIR:-$HOME/.cache/sdfio/flink-job-server-$beam_v-$flink_v}"
flink_ok() { [ -d "$1" ] && (cd "$1" && sha256sum --quiet --strict -c "$flink_sums") >/dev/null 2>&1 &&
	[ "$(ls "$1" | wc -l)" = "$(wc -l <"$flink_sums")" ]; }
if flink_ok "$flink_dir/lib"; then
	found "Flink job server" "$flink_dir (Beam $beam_v, Flink $flink_v)"
else
	installing "Flink job server" "(Beam $beam_v, Flink $flink_v: mvn dependency:copy-dependencies into $flink_dir)"
	no_mvn=""
	if ! command -v mvn >/dev/null 2>&1; then
		if [ -n "$ROOT" ]; then
			apt_install maven || fail "apt-get install maven failed"
		else
			root_pkgs+=(maven) # the jars then come with the next make deps
			no_mvn=1
		fi
	fi
	if [ -n "$no_mvn" ]; then
		:
	elif [ -z "$DRY" ]; then
		rm -rf "$flink_dir/lib.new"
		run mkdir -p "$flink_dir" &&
			run mvn -B -q -f "$flink_pom" dependency:copy-dependencies -DoutputDirectory="$flink_dir/lib.new" ||
			fail "mvn could not fetch Beam's Flink job server ($flink_pom)"
		if ! flink_ok "$flink_dir/lib.new"; then
			(cd "$flink_dir/lib.new" && sha256sum --strict -c "$flink_sums") >>"$LOG" 2>&1
			ls "$flink_dir/lib.new" >>"$LOG"
			fail "the Flink job server's jars in $flink_dir/lib.new do not match $flink_sums"
		fi
		rm -rf "$flink_dir/lib" && mv "$flink_dir/lib.new" "$flink_dir/lib" || fail "could not move the jars into $flink_dir/lib"
	else
		echo "    would run: mvn -B -q -f $flink_pom dependency:copy-dependencies -DoutputDirectory=$flink_dir/lib.new (then check $flink_sums)"
	fi
fi

# What needs root, for a user who has neither root nor sudo.
if [ ${#root_pkgs[@]} -gt 0 ]; then
	echo "make deps: $(id -un 2>/dev/null || echo "uid $(id -u)") is neither root nor has sudo, and ${root_pkgs[*]} come from apt; run as root, then make deps again:" >&2
	if [ -n "$root_google" ]; then
		cat >&2 <<ROOT
  apt-get update && apt-get install -y ca-certificates curl gnupg
  curl -fsSL $GOOGLE_APT/doc/apt-key.gpg | gpg --dearmor -o /usr/share/keyrings/cloud.google.gpg
  echo "deb [signed-by=/usr/share/keyrings/cloud.google.gpg] $GOOGLE_APT cloud-sdk main" >/etc/apt/sources.list.d/google-cloud-sdk.list
ROOT
	fi
	echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${root_pkgs[*]}" >&2
	exit 1
fi
