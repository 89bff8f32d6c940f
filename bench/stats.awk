# bench/stats.awk - the statistics the bench summaries share (loaded
# before them: awk -f bench/stats.awk -f bench/medians.awk ...).  The
# values of one series are v[key, 1..n].

function isnum(v) { return v ~ /^[0-9]+(\.[0-9]*)?$/ }

# median of the n values v[key, 1..n] (sorted copy, insertion sort: n is small)
function median(v, key, n,    a, i, j, t) {
	for (i = 1; i <= n; i++) {
		t = v[key, i]
		for (j = i - 1; j >= 1 && a[j] > t; j--)
			a[j + 1] = a[j]
		a[j + 1] = t
	}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}

function lo(v, key, n,    i, m) {
	m = v[key, 1]
	for (i = 2; i <= n; i++) if (v[key, i] < m) m = v[key, i]
	return m
}

function hi(v, key, n,    i, m) {
	m = v[key, 1]
	for (i = 2; i <= n; i++) if (v[key, i] > m) m = v[key, i]
	return m
}
