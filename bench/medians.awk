# bench/medians.awk - per-row medians of repeated nccl-tests style tables.
#
# usage: awk -v sides="A B C" [-v title=TEXT] -f bench/stats.awk -f bench/medians.awk \
#            side=A r=1 a.1.txt r=2 a.2.txt side=B r=1 b.1.txt ...
#
# The first side is the one measured (the shim); the others are baselines,
# of which each row takes the best median.  r numbers the rounds: round i
# of every side ran in the same minutes, so the per-round ratios pair the
# first side's round i with the others' round i (a failed or skipped run
# leaves its round out of the pairing only).  Prints, for out-of-place and in-place busbw, per row
# (size, type, redop, root): each side's median and range, the ratio of the
# first side's median to the best baseline median, and the lowest and
# highest per-round ratio.  When the first side's files carry coll_perf's
# pool efficiency table (-p 1), prints its medians too.
#
# A busbw that is not a number (N/A) is absent; a side with no value for a
# row prints N/A, and a ratio that cannot be formed prints "-".

function isrow() { return $0 !~ /^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ }
# pool efficiency rows: size type root solo bound, then bytes GB/s % out of
# place and in place, then the pipe bound and its two %
function iseff() { return $1 == "#" && NF == 15 && $2 ~ /^[0-9]+$/ && $7 ~ /^[0-9]+$/ }
# one busbw value of side s, repetition r, placement p (1 out, 2 in)
function add(s, r, k, p, x,    key) {
	if (!isnum(x))
		return
	key = s SUBSEP k SUBSEP p
	val[key, ++cnt[key]] = x + 0
	byrep[s, r, k, p] = x + 0
}

BEGIN {
	nsides = split(sides, sname, " ")
	for (i = 1; i <= nsides; i++)
		nside[sname[i]] = i
}

isrow() {
	k = $1 " " $3 " " $4 " " $5
	if (!(k in seen)) {
		order[++nrows] = k
		seen[k] = 1
	}
	if (!((side, r) in runs)) {
		runs[side, r] = 1
		rep[side]++
		if (r > maxr)
			maxr = r
	}
	add(side, r, k, 1, $8)
	add(side, r, k, 2, $12)
	next
}

iseff() && nside[side] == 1 {
	k = $2 " " $3 " " $4
	if (!(k in eseen)) {
		eorder[++nerows] = k
		eseen[k] = 1
	}
	ev[k, "bound", ++ecnt[k]] = $6 + 0
	ev[k, "out", ecnt[k]] = $9 + 0
	if (isnum($12))
		ev[k, "in", ++eincnt[k]] = $12 + 0
	ev[k, "pipe", ++epcnt[k]] = $13 + 0
	ev[k, "pout", epcnt[k]] = $14 + 0
	if (isnum($15))
		ev[k, "pin", ++epincnt[k]] = $15 + 0
}

# "median [lo-hi]" of the n efficiency values ev[k, what, 1..n], or N/A
function ecell(k, what, n) {
	if (!n)
		return sprintf("%21s", "N/A")
	return sprintf("%7.1f [%5.1f-%5.1f]", median(ev, k SUBSEP what, n),
		       lo(ev, k SUBSEP what, n), hi(ev, k SUBSEP what, n))
}

# "median [lo-hi]" of side s, or N/A
function cell(s, k, p,    key, n) {
	key = s SUBSEP k SUBSEP p
	n = cnt[key]
	if (!n)
		return sprintf("%21s", "N/A")
	return sprintf("%7.2f [%5.2f-%5.2f]", median(val, key, n), lo(val, key, n), hi(val, key, n))
}

function bestmed(k, p,    i, key, m, b) {
	b = -1
	for (i = 2; i <= nsides; i++) {
		key = sname[i] SUBSEP k SUBSEP p
		if (cnt[key] && (m = median(val, key, cnt[key])) > b)
			b = m
	}
	return b
}

# lowest and highest ratio of a round: first side over that round's best baseline
function round_ratios(k, p,    q, i, b, n, rr) {
	n = 0
	for (q = 1; q <= maxr; q++) {
		if (!((sname[1], q, k, p) in byrep))
			continue
		b = -1
		for (i = 2; i <= nsides; i++)
			if ((sname[i], q, k, p) in byrep && byrep[sname[i], q, k, p] > b)
				b = byrep[sname[i], q, k, p]
		if (b > 0)
			rr[++n] = byrep[sname[1], q, k, p] / b
	}
	if (!n)
		return sprintf("%11s", "-")
	return sprintf("%5.2f-%5.2f", min_of(rr, n), max_of(rr, n))
}

function min_of(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
function max_of(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }

function table(p, name,    i, j, k, f, key, num, b) {
	printf "# %s busbw (GB/s): median [min-max] of each side's runs; ratio = %s median / best other median\n", \
	       name, sname[1]
	printf "#       size      type   redop    root"
	for (i = 1; i <= nsides; i++)
		printf "  %21s", sname[i] " (" rep[sname[i]] + 0 ")"
	printf "    ratio  per-round\n"
	for (j = 1; j <= nrows; j++) {
		k = order[j]
		split(k, f, " ")
		printf "%12s  %8s  %6s  %6s", f[1], f[2], f[3], f[4]
		for (i = 1; i <= nsides; i++)
			printf "  %s", cell(sname[i], k, p)
		key = sname[1] SUBSEP k SUBSEP p
		num = cnt[key] ? median(val, key, cnt[key]) : -1
		b = bestmed(k, p)
		if (num >= 0 && b > 0)
			printf "  %7.2f", num / b
		else
			printf "  %7s", "-"
		printf "  %s\n", round_ratios(k, p)
	}
}

function eff_table(    j, k, f, n, pipe) {
	if (!nerows)
		return
	for (j = 1; j <= nerows; j++)
		if (epcnt[eorder[j]])
			pipe = 1
	printf "#\n# %s pool efficiency, %% of the concurrent memcpy bound%s: median [min-max] of %d runs\n", \
	       sname[1], pipe ? " and of the pipe bound" : "", rep[sname[1]]
	printf "#       size      type    root   bound GB/s           out-of-place %%              in-place %%"
	if (pipe)
		printf "    pipe GB/s      out-of-place %% pipe          in-place %% pipe"
	printf "\n"
	for (j = 1; j <= nerows; j++) {
		k = eorder[j]
		split(k, f, " ")
		printf "%12s  %8s  %6s  %11.2f  %s  %s", f[1], f[2], f[3],
		       median(ev, k SUBSEP "bound", ecnt[k]), ecell(k, "out", ecnt[k]),
		       ecell(k, "in", eincnt[k])
		if (pipe && (n = epcnt[k]))
			printf "  %11.2f  %s  %s", median(ev, k SUBSEP "pipe", n), ecell(k, "pout", n),
			       ecell(k, "pin", epincnt[k])
		printf "\n"
	}
}

END {
	if (!nrows) {
		print "# " (title ? title ": " : "") "no result rows to compare"
		exit 0
	}
	print "#"
	if (title)
		print "# " title
	table(1, "out-of-place")
	table(2, "in-place")
	eff_table()
}
