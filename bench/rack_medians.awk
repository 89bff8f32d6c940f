# bench/rack_medians.awk - the summary of bench/sock_rack.sh: reads its
# "round R size S net T pool P busy B" lines (any prefix) and prints per
# size the median of each column and the median [lowest-highest] of the
# per-round ratios pool/net and busy/net (load bench/stats.awk first).
# A round with a missing or zero figure leaves that column (and its
# ratio) out.

function add(key, x) { if (isnum(x) && x > 0) v[key, ++n[key]] = x }

{
	for (i = 1; i < NF; i++)
		if ($i == "round" && $(i + 2) == "size")
			break
	if (i >= NF || $(i + 4) != "net" || $(i + 6) != "pool" || $(i + 8) != "busy")
		next
	s = $(i + 3); t = $(i + 5); p = $(i + 7); b = $(i + 9)
	if (!(s in seen)) { seen[s] = 1; order[++sizes] = s; if (length(s) > w) w = length(s) }
	add(s SUBSEP "net", t); add(s SUBSEP "pool", p); add(s SUBSEP "busy", b)
	if (isnum(t) && t > 0) { add(s SUBSEP "pr", p / t); add(s SUBSEP "br", b / t) }
}

function col(k) { return n[k] ? sprintf("%.1f", median(v, k, n[k])) : "N/A" }
function ratio(k) {
	if (!n[k])
		return "-"
	return sprintf("%.2f [%.2f-%.2f]", median(v, k, n[k]), lo(v, k, n[k]), hi(v, k, n[k]))
}

END {
	if (w < 8)
		w = 8
	printf("%*s | %9s %9s %9s | %-19s | %-19s | %s\n", w, "size", "net p50", "pool p50",
	       "busy p50", "pool/net", "busy/net", "rounds")
	for (i = 1; i <= sizes; i++) {
		s = order[i]
		printf("%*s | %9s %9s %9s | %-19s | %-19s | %d\n", w, s, col(s SUBSEP "net"),
		       col(s SUBSEP "pool"), col(s SUBSEP "busy"), ratio(s SUBSEP "pr"),
		       ratio(s SUBSEP "br"), n[s SUBSEP "pr"])
	}
}
