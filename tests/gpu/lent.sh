#!/usr/bin/env bash
# tests/gpu/lent.sh - run the GPU acceptance (tests/gpu/accept.sh) on a lent
# GPU machine that has CUDA, PyTorch and its NCCL wheel but no Debian
# packages and no network: everything else is built here and carried.
#
#   tests/gpu/lent.sh pack NCCL_TESTS_SRC   on Debian 12 (make deps done):
#       fills .gpu/ (in .gitignore) with what the GPU machine lacks:
#         build/          libcxlshim.so (GPU reduction kernels for sm_80 and
#                         sm_90 inside) and the test programs of accept.sh
#         shimlib/        libnuma.so.1 and libinih.so.1, which the shim needs
#         nccl-tests.tar.xz  nccl-tests built twice for sm_90, with MPI
#                         (nt-mpi/) and with threads (nt/)
#         ompi.tar.xz     Debian's Open MPI 4.1, relocated: mpirun is a
#                         wrapper that points Open MPI and PMIx at the copy,
#                         so only MPI runs see its libraries
#   tests/gpu/lent.sh run [ACCEPT ARGS...]  on the GPU machine, from the
#       repository root with .gpu/ carried: unpacks, checks that the carried
#       mpirun starts two ranks (else nccl-tests run as threads), runs
#       accept.sh on the carried build, and leaves accept.tar.gz (logs,
#       summary, env) in $OUT (or .gpu/); LENT_TAG=NAME names it NAME.tar.gz
#       instead, for a second run in the same call.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
G=$ROOT/.gpu
TESTS="coll_check reduce_check api_check p2p_check pg_check pinned_bw"

die() { echo "lent.sh: $*" >&2; exit 1; }

# Open MPI's runtime: the copy, the libraries its programs and plugins load
# (less the C runtime every Linux has), mpi.h for accept.sh's check, and a
# two-rank program to prove it starts.
pack_ompi() {
	local b=$1 L=/usr/lib/x86_64-linux-gnu
	local skip='linux-vdso|ld-linux|/lib(c|m|dl|pthread|rt|z|udev|stdc\+\+|gcc_s)\.so'
	mkdir -p "$b/bin" "$b/lib" "$b/share" "$b/etc" "$b/include" || return 1
	cp -a "$L/openmpi" "$L/pmix2" "$b/lib/" &&
		cp -a /usr/share/openmpi "$b/share/" &&
		cp /etc/openmpi/openmpi-mca-params.conf "$b/etc/" &&
		cp "$L/openmpi/include/mpi.h" "$L/openmpi/include/mpi_portable_platform.h" "$b/include/" &&
		cp -L /usr/bin/orterun "$b/bin/orterun" || return 1
	find "$b" -type f \( -name '*.so*' -o -path "$b/bin/*" \) -print0 | xargs -0 ldd 2>/dev/null |
		awk '/=>/ && $3 ~ /^\// { print $3 }' | sort -u | grep -Ev "$skip" |
		while read -r f; do cp -L "$f" "$b/lib/"; done
	mpicc -o "$b/bin/mpi_hello" tests/gpu/mpi_hello.c || return 1
	cat >"$b/bin/mpirun" <<'EOF'
#!/bin/sh
# the relocated Open MPI: its paths, its libraries, root allowed
B=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH=$B/lib:$B/lib/openmpi/lib:$B/lib/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$B OPAL_LIBDIR=$B/lib/openmpi/lib OPAL_PKGLIBDIR=$B/lib/openmpi/lib/openmpi3
export OPAL_PKGDATADIR=$B/share/openmpi OPAL_DATADIR=$B/share OPAL_SYSCONFDIR=$B/etc OPAL_BINDIR=$B/bin
export PMIX_MCA_mca_base_component_path=$B/lib/pmix2/lib/pmix PMIX_INSTALL_PREFIX=$B/lib/pmix2
export OMPI_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_mca_base_component_show_load_errors=0
export PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
exec "$B/bin/orterun" "$@"
EOF
	chmod +x "$b/bin/mpirun"
}

pack() {
	local src=${1:-} t tmp mpi
	[ -f "$src/src/all_gather.cu" ] || die "pack needs a NVIDIA/nccl-tests checkout"
	make -j"$(nproc)" test-build || die "make test-build failed"
	grep -q . build/kernels/fold.fatbin || die "built without nvcc: no GPU reduction kernels"
	rm -rf "$G" && mkdir -p "$G/build/tests" "$G/shimlib" || exit 1
	cp -a build/libcxlshim.so build/kernels "$G/build/" || exit 1
	for t in $TESTS; do cp -a "build/tests/$t" "$G/build/tests/" || exit 1; done
	cp -L /lib/x86_64-linux-gnu/libnuma.so.1 /lib/x86_64-linux-gnu/libinih.so.1 "$G/shimlib/" || exit 1
	tmp=$(mktemp -d) || exit 1
	for t in nt nt-mpi; do
		mpi=0
		[ $t = nt-mpi ] && mpi=1
		make -C "$src" -j"$(nproc)" MPI=$mpi \
			MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi CUDA_HOME=/usr/local/cuda \
			NCCL_HOME=/usr/local/cuda BUILDDIR="$tmp/$t" \
			NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$tmp/$t.log" 2>&1 ||
			die "nccl-tests build ($t) failed: $tmp/$t.log"
	done
	(cd "$tmp" && tar cJf "$G/nccl-tests.tar.xz" nt/*_perf nt-mpi/*_perf) || exit 1
	pack_ompi "$tmp/ompi" || die "Open MPI copy failed"
	(cd "$tmp" && tar cJf "$G/ompi.tar.xz" ompi) || exit 1
	rm -rf "$tmp"
	du -sh "$G"
	echo "carry .gpu; on the GPU machine: tests/gpu/lent.sh run [--quick] [--budget S]"
}

# a carried library only where the machine has none of that name
shim_libs() {
	local d=/tmp/lent/shimlib f
	mkdir -p "$d"
	for f in "$G"/shimlib/*; do
		ldconfig -p | awk '{ print $1 }' | grep -qxF "$(basename "$f")" || ln -sf "$f" "$d/"
	done
	export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

run() {
	local out=${OUT:-$G} nt="nt" rc tag=${LENT_TAG:-accept}
	[ -f "$G/build/libcxlshim.so" ] || die "no .gpu/build: run 'lent.sh pack' on Debian 12 and carry .gpu"
	# accept.sh's --budget counts from here, the unpacking included
	export CXLSHIM_ACCEPT_START=${CXLSHIM_ACCEPT_START:-$(date +%s)}
	rm -rf "/tmp/lent/$tag"
	mkdir -p /tmp/lent && tar xJf "$G/nccl-tests.tar.xz" -C /tmp/lent && tar xJf "$G/ompi.tar.xz" -C /tmp/lent || exit 1
	shim_libs
	if timeout 60 /tmp/lent/ompi/bin/mpirun -np 2 --oversubscribe /tmp/lent/ompi/bin/mpi_hello \
		>/tmp/lent/mpi_hello.log 2>&1; then
		nt="nt-mpi"
		export PATH=/tmp/lent/ompi/bin:$PATH NCCL_TESTS_MPI_HOME=/tmp/lent/ompi
	else
		echo "lent.sh: the carried Open MPI did not start two ranks; nccl-tests run as threads (one GPU each):"
		tail -n 5 /tmp/lent/mpi_hello.log
	fi
	export PATH=/tmp/lent/$nt:$PATH
	BUILD=.gpu/build CXLSHIM_ACCEPT_PREBUILT=1 tests/gpu/accept.sh -o "/tmp/lent/$tag" "$@"
	rc=$?
	cp /tmp/lent/mpi_hello.log "/tmp/lent/$tag/logs/" 2>/dev/null
	tar czf "$out/$tag.tar.gz" --exclude nccl-home -C /tmp/lent "$tag" ||
		{ echo "lent.sh: could not write $out/$tag.tar.gz" >&2; rc=1; }
	return $rc
}

case ${1:-} in
pack) shift; pack "$@" ;;
run) shift; run "$@" ;;
*) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
