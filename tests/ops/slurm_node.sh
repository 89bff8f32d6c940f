# shellcheck shell=bash
# slurm_node.sh - a one-node Slurm cluster for a test, sourced by
# tests/ops/launchers.sh:
#
#   slurm_node_start DIR   munged, slurmctld and slurmd of this host, every
#                          key, state, spool, log and socket under DIR;
#                          exports SLURM_CONF.  0 when the node is idle;
#                          1 with the reason on stderr otherwise
#   slurm_node_stop        cancels what is left, stops the daemons it
#                          started (by their pids), waits for them
#
# Nothing is read from or written to /etc, /run or /var: munged gets its
# key, socket, pid, log and seed paths on the command line, the Slurm
# daemons and clients read $SLURM_CONF (and -f), and slurm.conf names every
# path and a pair of free ports, so it runs beside a real Slurm or munge.
# No cgroups: processes are tracked by parentage (proctrack/linuxproc) and
# not bound (task/none).  The node has this machine's CPUs; tasks beyond
# them need `srun -O` (overcommit).

slurm_pids=()

# Two TCP ports nobody listens on now.
slurm_free_ports() {
	python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s:
	x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))'
}

slurm_conf() { # DIR HOST CTLD_PORT SLURMD_PORT
	cat <<-EOF
	ClusterName=cxlshim-test
	SlurmctldHost=$2(127.0.0.1)
	SlurmctldPort=$3
	SlurmdPort=$4
	SlurmUser=root
	SlurmdUser=root
	AuthType=auth/munge
	CredType=cred/munge
	AuthInfo=socket=$1/munge.socket
	StateSaveLocation=$1/state
	SlurmdSpoolDir=$1/spool
	SlurmctldPidFile=$1/slurmctld.pid
	SlurmdPidFile=$1/slurmd.pid
	SlurmctldLogFile=$1/slurmctld.log
	SlurmdLogFile=$1/slurmd.log
	ProctrackType=proctrack/linuxproc
	TaskPlugin=task/none
	SelectType=select/linear
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	JobCompType=jobcomp/none
	MpiDefault=none
	SwitchType=switch/none
	ReturnToService=2
	NodeName=$2 NodeAddr=127.0.0.1 CPUs=$(getconf _NPROCESSORS_ONLN) State=UNKNOWN
	PartitionName=test Nodes=$2 Default=YES MaxTime=10 State=UP
	EOF
}

# DAEMON LOG: why it failed: its last fatal line, else its last error
# other than the missing state files every first start logs
slurm_why() {
	local line

	line=$(grep -i 'fatal' "$2" 2>/dev/null | tail -n 1)
	[ -n "$line" ] || line=$(grep -i 'error' "$2" 2>/dev/null | grep -vE 'state (save )?file' | tail -n 1)
	echo "$1 did not start: ${line:-nothing in $2}"
}

slurm_node_start() {
	local dir=$1 host ports state

	host=$(hostname -s)
	ports=$(slurm_free_ports) || return 1
	mkdir -p "$dir/state" "$dir/spool" || return 1
	chmod 0711 "$dir"
	head -c 1024 /dev/urandom >"$dir/munge.key" && chmod 0400 "$dir/munge.key" || return 1
	# shellcheck disable=SC2086 # two ports, two arguments
	slurm_conf "$dir" "$host" $ports >"$dir/slurm.conf" || return 1
	export SLURM_CONF=$dir/slurm.conf

	# -F/-D: in the foreground, so the pids are ours to stop
	munged -F -f --socket="$dir/munge.socket" --key-file="$dir/munge.key" \
		--pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
		--seed-file="$dir/munged.seed" 2>>"$dir/munged.log" &
	slurm_pids+=($!)
	for _ in $(seq 50); do
		[ -S "$dir/munge.socket" ] && break
		sleep 0.1
	done
	[ -S "$dir/munge.socket" ] || { slurm_why munged "$dir/munged.log" >&2; return 1; }
	slurmctld -D -f "$SLURM_CONF" 2>>"$dir/slurmctld.log" &
	slurm_pids+=($!)
	slurmd -D -f "$SLURM_CONF" -N "$host" 2>>"$dir/slurmd.log" &
	slurm_pids+=($!)
	for _ in $(seq 100); do
		state=$(sinfo -h -N -o %T 2>/dev/null)
		[ "$state" = idle ] && return 0
		slurm_alive "${slurm_pids[1]}" && slurm_alive "${slurm_pids[2]}" || break
		sleep 0.2
	done
	slurm_alive "${slurm_pids[1]}" || { slurm_why slurmctld "$dir/slurmctld.log" >&2; return 1; }
	slurm_alive "${slurm_pids[2]}" || { slurm_why slurmd "$dir/slurmd.log" >&2; return 1; }
	echo "the node is '${state:-unknown}', not idle, after 20 s: $(slurm_why slurmd "$dir/slurmd.log")" >&2
	return 1
}

# PID: runs (a zombie, ours until waited for, does not)
slurm_alive() {
	local stat

	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) } # the state letter follows the command's closing parenthesis
	[ "${stat%% *}" != Z ]
}

# PID...: 0 once none of them runs, 1 after 5 s
slurm_gone() {
	local pid=

	for _ in $(seq 50); do
		for pid in "$@"; do
			slurm_alive "$pid" && break
			pid=
		done
		[ -z "$pid" ] && return 0
		sleep 0.1
	done
	return 1
}

# The step daemons of this cluster: slurmd starts them detached, with its
# own environment (so our SLURM_CONF).
slurm_stepds() {
	local p

	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ] &&
			tr '\0' '\n' 2>/dev/null <"$p/environ" |
			grep -qxF "SLURM_CONF=$SLURM_CONF" && echo "${p#/proc/}"
	done
}

slurm_node_stop() {
	local pid stepds

	[ ${#slurm_pids[@]} -gt 0 ] || return 0
	scancel -f -u "$(id -un)" 2>/dev/null
	stepds=$(slurm_stepds)
	# shellcheck disable=SC2086 # a list of pids
	slurm_gone $stepds || kill -KILL $stepds 2>/dev/null
	scontrol shutdown 2>/dev/null
	# the Slurm daemons first, munged last: they authenticate through it
	slurm_gone "${slurm_pids[@]:1}" || kill -TERM "${slurm_pids[@]:1}" 2>/dev/null
	slurm_gone "${slurm_pids[@]:1}" || kill -KILL "${slurm_pids[@]:1}" 2>/dev/null
	kill -TERM "${slurm_pids[0]}" 2>/dev/null
	slurm_gone "${slurm_pids[0]}" || kill -KILL "${slurm_pids[0]}" 2>/dev/null
	for pid in "${slurm_pids[@]}"; do
		wait "$pid" 2>/dev/null
	done
	slurm_pids=()
}
