# shellcheck shell=bash
# The report of scripts/bench.sh: the figures of every section from the
# runner's lines, the JSON (--json; the targets judged in it), the table, and
# --check (every row, VERSION and parallel figure present and numeric: not
# timings). Timings are reported, never asserted: the targets are printed as
# met or not.

# report: $W/cycles, each section's figures, the JSON (copied to $JSON), the
# table.
report() {
	# Per (label, rep): ADD+DEL wall = the sum of its steps; CPU summed; RSS max.
	# Labels carry the round ("|r<N>"): each round's reps count from 0 again.
	awk -F'\t' '{ k = $1 "\t" $2; w[k] += $5; c[k] += $6; u[k] += $8; if ($7 > m[k]) m[k] = $7 }
		END { for (k in w) { split(k, f, "\t"); l = f[1]; sub(/\|r[0-9]+$/, "", l)
			print l "\t" f[2] "\t" w[k] "\t" c[k] "\t" m[k] "\t" u[k] } }' "$W/raw" |
		sort >"$W/cycles"
	runtime_floor_json
	machine=$(jq -cn --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
		--arg kernel "$(uname -r)" --argjson cores "$(nproc)" \
		--arg fs "$(stat -f -c %T "$STATE")" --arg hfs "$(stat -f -c %T "$HINTS")" \
		--arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --arg date "$(date -u +%FT%TZ)" \
		'{cpu: $cpu, cores: $cores, kernel: $kernel, state_fs: $fs, hints_fs: $hfs,
		  loadavg_after: $load, date: $date}')
	serial_json
	version_json
	parallel_json
	kube_json
	dra_json
	pairs_json
	floor_json
	report_json
	cp "$W/bench.json" "$JSON"
	report_table
}

# report_json: $W/bench.json, every section's figures and the targets (issue
# 8), judged on the no-IPAM move-mode rows (the plugin's own cost) and, for
# throughput, on hpn-rdma's rows.
report_json() {
	jq -n --argjson m "$machine" --slurpfile s "$W/serial.json" --slurpfile v "$W/version.json" \
		--slurpfile p "$W/par.json" --argjson disc "$disc" --argjson kern "$kern" --argjson vm "$vm" \
		--argjson floortrue "$floortrue" --argjson pairs "$pairs" \
		--argjson rt "$rt" --argjson rtfloor "$rtfloor" --argjson kube "$kube" \
		--argjson aglat "$agent_lat" --argjson gpu "$gpu" --argjson dra "$dra" --argjson nri "$nri" \
		--arg quick "$QUICK" --argjson iter "$ITER" --argjson rounds "$ROUNDS" \
		--arg par "$PAR" --argjson preps "$PAR_REPS" --arg mtu "$MTU" '
		($s[0] | map({(.row): .}) | add) as $r |
		($v[0] | map({(.plugin): .}) | add) as $ver |
		($pairs | map({(.variant): .}) | add // {}) as $pr |
		def ratio(a; b): if (a | type) == "number" and (b | type) == "number" and b > 0
			then a / b else null end;
		# What row a adds to row b: wall (of the medians) and CPU.
		def d(a; b): if $r[a] and $r[b] and ($r[a].wall_ms | type) == "object" and
			($r[b].wall_ms | type) == "object"
			then {wall_ms: ($r[a].wall_ms.median - $r[b].wall_ms.median),
			      cpu_ms: ($r[a].cpu_ms - $r[b].cpu_ms)} else null end;
		def t(name; val; lim; cmp): {target: name, value: val, limit: lim,
			met: (if val == null then null elif cmp == "le" then val <= lim else val >= lim end)};
		# floor: the least any plugin could reach on this machine, where it is measured.
		def t(name; val; lim; cmp; floor): t(name; val; lim; cmp) + {floor: floor};
		# /bin/true as started between the rounds of the serial rows, else in the VERSION rows.
		($floortrue.cpu_ms // $ver["true"].cpu_ms) as $start |
		(if ($kern.cpu_ms | type) == "number" and ($start | type) == "number"
		 then 2 * $start + $kern.cpu_ms else null end) as $cpufloor |
		# What hpn-rdma adds to a pod (Run, Stop, Remove) through containerd.
		(if $rt.rows then ($rt.rows | map({(.row): .}) | add) else {} end) as $rr |
		(if $rr["runtime.hpn-rdma"] and $rr["runtime.bridge"]
		 then $rr["runtime.hpn-rdma"].wall_ms.median - $rr["runtime.bridge"].wall_ms.median
		 else null end) as $added |
		(if $rr["runtime.passthrough"] and $rr["runtime.bridge"]
		 then $rr["runtime.passthrough"].wall_ms.median - $rr["runtime.bridge"].wall_ms.median
		 else null end) as $chain |
		{
		  machine: $m,
		  settings: {quick: ($quick == "1"), cycles_per_row: $iter, rounds: $rounds,
			parallel_widths: ($par | split(" ") | map(select(. != "") | tonumber)),
			parallel_reps: $preps, mtu: (if $mtu == "" then null else ($mtu | tonumber) end),
			hpn_rdma: "rdmaRequired false (veths have no RDMA device)",
			ipam: "none, and Debian static (its CPU and RSS included)",
			floor: "iproute2, one ip -batch per netns per ADD/DEL half"},
		  serial: $s[0],
		  version: $v[0],
		  parallel: $p[0],
		  rdma_discovery: $disc,
		  kernel_floor: ($kern + {process_start_cpu_ms: $start}),
		  pairs: $pairs,
		  agent: (if $aglat.allocate then $aglat + {
			lookup_added_ms: {none: (($r["move.none.hpn-agent"].wall_ms.median // null) as $a |
				if $a then $a - $r["move.none.hpn-rdma"].wall_ms.median else null end),
			  static: (($r["move.static.hpn-agent"].wall_ms.median // null) as $a |
				if $a then $a - $r["move.static.hpn-rdma"].wall_ms.median else null end)}}
			else $aglat end),
		  kubernetes: (if $kube.rows then
			($kube + {lookup_added: d("kube.none.hpn-klabel"; "kube.none.hpn-kanno"),
				annotations_added: d("kube.none.hpn-kanno"; "move.none.hpn-rdma"),
				# Through the agent: the pod question and the allocation lookup;
				# less the allocation lookup (hpn-agent - hpn-rdma): the pod question.
				agent_lookup_added: d("kube.none.hpn-kagent"; "kube.none.hpn-kanno"),
				agent_pod_question: (d("kube.none.hpn-kagent"; "kube.none.hpn-kanno") as $k |
					d("move.none.hpn-agent"; "move.none.hpn-rdma") as $a |
					if $k and $a then {wall_ms: ($k.wall_ms - $a.wall_ms),
						cpu_ms: ($k.cpu_ms - $a.cpu_ms)} else null end)})
			else $kube end),
		  # ADD+DEL of a pod whose claim names its NIC, against the pool and the
		  # allocation of the device plugin, both through the same agent.
		  dra: (if $dra.prepare then $dra + {
			added_vs_pool: d("dra.none.hpn-dra"; "move.none.hpn-rdma"),
			added_vs_device_plugin: d("dra.none.hpn-dra"; "move.none.hpn-agent")} else $dra end),
		  pod8: (if ($r["move8.none.hpn-rdma"].wall_ms | type) == "object" then
			# A pod of 8 NICs (move, no IPAM) against the floors of 8 moves: the
			# iproute2 floor in one ip -batch per netns, 8 times the kernel floor of
			# one move (hpn-bench-kernel, per cycle, taken between the rounds), 8
			# times the one-NIC iproute2 floor; CPU against 2 starts + 8 kernel moves.
			($r["move8.none.hpn-rdma"]) as $h |
			($r["move8.none.iproute2"].wall_ms.median // null) as $ip8 |
			(if ($kern.wall_ms | type) == "number" then 8 * $kern.wall_ms else null end) as $k8 |
			(($r["move.none.iproute2"].wall_ms.median // null) as $ip1 |
			 if $ip1 then 8 * $ip1 else null end) as $ip1x8 |
			(if ($kern.cpu_ms | type) == "number" and ($start | type) == "number"
			 then 2 * $start + 8 * $kern.cpu_ms else null end) as $cpu8 |
			{nics: 8, rows: ["move8.none.hpn-rdma", "move8.none.iproute2"],
			 note: ("veths: no RDMA device (the host kernel has no RDMA), so the 8 moves," +
				" the rails and the state only; not the RDMA proofs a multi-NIC ADD runs at once"),
			 hpn_rdma_ms: $h.wall_ms.median, hpn_rdma_cpu_ms: $h.cpu_ms,
			 iproute2_8_moves_ms: $ip8, kernel_8x_one_move_ms: $k8,
			 iproute2_8x_one_move_ms: $ip1x8, cpu_floor_8_moves_ms: $cpu8,
			 vs_kernel_8x: ratio($h.wall_ms.median; $k8),
			 vs_iproute2_8_moves: ratio($h.wall_ms.median; $ip8),
			 vs_iproute2_8x_one_move: ratio($h.wall_ms.median; $ip1x8),
			 cpu_vs_floor_8: ratio($h.cpu_ms; $cpu8)}
			else {skipped: "move8.none.hpn-rdma not measured (BENCH_ROWS)"} end),
		  vm: $vm,
		  gpu_choice: $gpu,
		  runtime: (if $rt.rows then $rt + {added_ms: $added, passthrough_added_ms: $chain,
			floor_ms: $rtfloor, floor_cycles: "move.none.iproute2, one after each pair of pods",
			vs_floor: ratio($added; $rtfloor)} else $rt end),
		  nri: $nri,
		  targets: ((if $cpufloor == null then [] else [
			# CPU and VERSION against what no plugin can beat here (the floor line below).
			t("cpu per ADD+DEL vs the CPU floor (no IPAM)";
			  ratio($r["move.none.hpn-rdma"].cpu_ms; $cpufloor); 2.0; "le")] end) + [
			t("cpu per ADD+DEL vs host-device (no IPAM)";
			  ratio($r["move.none.hpn-rdma"].cpu_ms; $r["move.none.host-device"].cpu_ms); 0.3; "le";
			  ratio($cpufloor; $r["move.none.host-device"].cpu_ms)),
			t("peak RSS vs host-device (no IPAM)";
			  ratio($r["move.none.hpn-rdma"].peak_rss_kb; $r["move.none.host-device"].peak_rss_kb); 0.5; "le"),
			t("VERSION latency vs /bin/true";
			  ratio($ver["hpn-rdma"].wall_ms.median; $ver["true"].wall_ms.median); 1.3; "le"),
			t("VERSION latency vs host-device";
			  ratio($ver["hpn-rdma"].wall_ms.median; $ver["host-device"].wall_ms.median); 0.3; "le";
			  ratio($ver["true"].wall_ms.median; $ver["host-device"].wall_ms.median)),
			# Judged on the pairs, cycle by cycle; on the rows when there are none.
			t("ADD+DEL wall vs host-device (no IPAM)";
			  $pr["none"].ratio // ratio($r["move.none.hpn-rdma"].wall_ms.median;
			    $r["move.none.host-device"].wall_ms.median); 1.0; "le"),
			t("ADD+DEL wall vs host-device (static IPAM)";
			  $pr["static"].ratio // ratio($r["move.static.hpn-rdma"].wall_ms.median;
			    $r["move.static.host-device"].wall_ms.median); 1.0; "le"),
			t("ADD+DEL wall vs iproute2 floor (no IPAM)";
			  ratio($r["move.none.hpn-rdma"].wall_ms.median; $r["move.none.iproute2"].wall_ms.median); 1.1; "le")
		  ] + (if ($vm.hpn.vs_floor | type) == "number" then [
			t("ib_write_bw pod to pod through hpn-rdma vs the floor (VM, virtio, softRoce)";
			  $vm.hpn.vs_floor; 0.95; "ge")] else [] end) +
		  (if ($vm.hpn.pool8.add8_vs_base | type) == "number" then [
			t("ADD of 8 NICs with proofs vs 1 with its proof + 7 NICs without (VM, softRoce)";
			  $vm.hpn.pool8.add8_vs_base; 1.5; "le")] else [] end) + (if $added == null then [] else [
			t("time hpn-rdma adds to a pod through containerd vs iproute2 floor (move, no IPAM)";
			  ratio($added; $rtfloor); 1.1; "le")] end) +
		  # Milliseconds, not a ratio: what the NRI plugin of the agent adds to a container.
		  (if ($nri.added_on.total_ms | type) == "number" then [
			t("time hpn-rdma-agent\u0027s NRI plugin adds to CreateContainer+StartContainer (median)";
			  $nri.added_on.total_ms; 2; "le") + {unit: "ms"}] else [] end) + [ $p[0][] | select(.row | test("^move\\..*\\.hpn-rdma$")) | select(.pods > 1) |
			t("parallel throughput vs serial, \(.row | split(".")[1]) IPAM, N=\(.pods)"; .vs_serial; 1.0; "ge") ])
		}' >"$W/bench.json"
}

# report_table: the table, from the JSON.
report_table() {
	jq -r '
		def f(x): if x == null then "-" else (x * 100 | round / 100 | tostring) end;
		def r(x): if x == null then "-" else ((x * 100 | round / 100 | tostring) + "x") end;
		# Targets are judged on the exact ratio: show enough digits that 1.002x is not "1x".
		def r3(x): if x == null then "-" else ((x * 1000 | round / 1000 | tostring) + "x") end;
		def pad(n): tostring | if length < n then . + (" " * (n - length)) else . end;
		def lpad(n): tostring | if length < n then (" " * (n - length)) + . else . end;
		(.serial | map({(.row): .}) | add) as $r |
		"ADD+DEL, serial (\(.settings.cycles_per_row) cycles per row; CPU includes IPAM children)",
		("row" | pad(28)) + ("median ms" | lpad(10)) + ("p99 ms" | lpad(9)) + ("CPU ms" | lpad(9)) +
		("user" | lpad(7)) + ("RSS MB" | lpad(8)) + ("wall/hd" | lpad(9)) + ("cpu/hd" | lpad(8)) + ("rss/hd" | lpad(8)) +
		("wall/ip" | lpad(9)),
		(.serial[] | . as $x | ($x.row | split(".") | .[0] |= if . == "dra" then "move" else . end) as $k |
		 # No reference plugin attaches 8 NICs in one ADD: move8 rows have no hd.
		 (if $k[0] == "move8" then null else
		  $r["\($k[0]).\($k[1]).\(if $k[0] == "move" then "host-device" else "macvlan" end)"] end) as $hd |
		 ($r["\($k[0]).\($k[1]).iproute2"]) as $ip |
		 if .skipped then ($x.row | pad(28)) + "skipped: " + .skipped else
		 ($x.row | pad(28)) + (f($x.wall_ms.median) | lpad(10)) + (f($x.wall_ms.p99) | lpad(9)) +
		 (f($x.cpu_ms) | lpad(9)) + (f($x.user_cpu_ms) | lpad(7)) + (f($x.peak_rss_kb / 1024) | lpad(8)) +
		 (r(if $hd.wall_ms then $x.wall_ms.median / $hd.wall_ms.median else null end) | lpad(9)) +
		 (r(if $hd.cpu_ms and $hd.cpu_ms > 0 then $x.cpu_ms / $hd.cpu_ms else null end) | lpad(8)) +
		 (r(if $hd.peak_rss_kb and $hd.peak_rss_kb > 0 then $x.peak_rss_kb / $hd.peak_rss_kb else null end) | lpad(8)) +
		 (r(if $ip.wall_ms then $x.wall_ms.median / $ip.wall_ms.median else null end) | lpad(9))
		 end),
		"",
		(if .pod8.hpn_rdma_ms then
		 "A pod of 8 NICs (move8.none.hpn-rdma: match, count 8; veths, no RDMA device: moves, rails, state only)," +
		 " ADD+DEL \(f(.pod8.hpn_rdma_ms)) ms, CPU \(f(.pod8.hpn_rdma_cpu_ms)) ms, against",
		 "  8 x the kernel floor of one move (hpn-bench-kernel)   \(f(.pod8.kernel_8x_one_move_ms) | lpad(8)) ms" +
		 "   \(r3(.pod8.vs_kernel_8x))",
		 "  the iproute2 floor of 8 moves (move8.none.iproute2)   \(f(.pod8.iproute2_8_moves_ms) | lpad(8)) ms" +
		 "   \(r3(.pod8.vs_iproute2_8_moves))",
		 "  8 x the iproute2 floor of one (move.none.iproute2)    \(f(.pod8.iproute2_8x_one_move_ms) | lpad(8)) ms" +
		 "   \(r3(.pod8.vs_iproute2_8x_one_move))",
		 "  CPU: 2 starts of /bin/true + 8 kernel moves           \(f(.pod8.cpu_floor_8_moves_ms) | lpad(8)) ms" +
		 "   \(r3(.pod8.cpu_vs_floor_8))", "" else empty end),
		"VERSION",
		("plugin" | pad(28)) + ("median ms" | lpad(10)) + ("p99 ms" | lpad(9)) + ("CPU ms" | lpad(9)) +
		("user" | lpad(7)) + ("RSS MB" | lpad(8)) + ("vs hd" | lpad(8)),
		((.version | map({(.plugin): .}) | add) as $v |
		 .version[] | (.plugin | pad(28)) + (f(.wall_ms.median) | lpad(10)) + (f(.wall_ms.p99) | lpad(9)) +
		 (f(.cpu_ms) | lpad(9)) + (f(.user_cpu_ms) | lpad(7)) + (f(.peak_rss_kb / 1024) | lpad(8)) +
		 (r(.wall_ms.median / $v["host-device"].wall_ms.median) | lpad(8))),
		((.version | map({(.plugin): .}) | add)["hpn-rdma-status"] | if . then
		 "hpn-rdma-status is one STATUS (CNI 1.1.0, a pool of \"nic*\"): containerd 2.x runs one at every CRI" +
		 " Status, kubelet asks every 5 s: 720 an hour, \(f(.cpu_ms * 720 / 1000)) s of CPU an hour" +
		 " (\(f(.cpu_ms * 720 / 3600 / 10)) % of a core)" else empty end),
		"",
		(if .kubernetes.skipped then "Kubernetes API rows skipped: " + .kubernetes.skipped, "" else
		 "Kubernetes API lookup (\(.kubernetes.server)), per ADD+DEL:",
		 (.kubernetes.rows[] | "  \(.row): \(.requests) requests for \(.adds) ADDs"),
		 (if .kubernetes.lookup_added then
		  "  podSelector.label decides (one GET per ADD): +\(f(.kubernetes.lookup_added.wall_ms)) ms wall," +
		  " +\(f(.kubernetes.lookup_added.cpu_ms)) ms CPU over the annotations deciding" else empty end),
		 (if .kubernetes.agent_lookup_added then
		  "  podSelector.label decides, the pod cache of hpn-rdma-agent answers (no request): +\(f(.kubernetes.agent_lookup_added.wall_ms)) ms wall," +
		  " +\(f(.kubernetes.agent_lookup_added.cpu_ms)) ms CPU over the annotations deciding, the allocation lookup included" +
		  (if .kubernetes.agent_pod_question then "; the pod question alone (less move.none.hpn-agent - move.none.hpn-rdma): \(f(.kubernetes.agent_pod_question.wall_ms)) ms wall, \(f(.kubernetes.agent_pod_question.cpu_ms)) ms CPU" else "" end)
		  else empty end),
		 (if .kubernetes.annotations_added then
		  "  the annotations decide (no request): \(f(.kubernetes.annotations_added.wall_ms)) ms wall," +
		  " \(f(.kubernetes.annotations_added.cpu_ms)) ms CPU against move.none.hpn-rdma (no \"kubernetes\"): noise" else empty end),
		 ((.version | map({(.plugin): .}) | add) as $v |
		  if $v["hpn-rdma-linked-curl-yaml"] then
		  "  linking libcurl + libyaml instead of dlopen(): +\(f($v["hpn-rdma-linked-curl-yaml"].cpu_ms - $v["hpn-rdma"].cpu_ms)) ms CPU," +
		  " +\(f($v["hpn-rdma-linked-curl-yaml"].wall_ms.median - $v["hpn-rdma"].wall_ms.median)) ms wall per start (VERSION)" else empty end),
		 "" end),
		(if (.pairs | length) > 0 then
		 "ADD+DEL wall, hpn-rdma and host-device cycle by cycle (median ms; of the per-cycle difference)",
		 (.pairs[] | "  move.\(.variant): hpn-rdma \(f(.hpn_rdma_ms)), host-device \(f(.host_device_ms))," +
		  " \(r3(.ratio)); difference \(f(.difference_ms)) ms over \(.cycles) cycles"), "" else empty end),
		"N pods at once (ADD all, then DEL all; median of \(.settings.parallel_reps))",
		("row" | pad(28)) + ("N" | lpad(4)) + ("round ms" | lpad(10)) + ("pods/s" | lpad(9)) +
		("vs N=1" | lpad(8)),
		(.parallel | sort_by(.row, .pods)[] | (.row | pad(28)) + (.pods | lpad(4)) +
		 (f(.round_ms) | lpad(10)) + (f(.pods_per_s) | lpad(9)) + (r(.vs_serial) | lpad(8))),
		"",
		(if .runtime.skipped then "Runtime rows skipped: " + .runtime.skipped, "" else
		 "A pod through containerd \(.runtime.containerd): RunPodSandbox -> StopPodSandbox -> RemovePodSandbox" +
		 " (\(.runtime.rows[0].cycles) cycles per row)",
		 ("row" | pad(28)) + ("median ms" | lpad(10)) + ("p99 ms" | lpad(9)) + ("Run" | lpad(8)) +
		 ("Stop" | lpad(8)) + ("Remove" | lpad(8)),
		 (.runtime.rows[] | (.row | pad(28)) + (f(.wall_ms.median) | lpad(10)) + (f(.wall_ms.p99) | lpad(9)) +
		  (f(.run_ms) | lpad(8)) + (f(.stop_ms) | lpad(8)) + (f(.remove_ms) | lpad(8))),
		 (if .runtime.added_ms then
		  "hpn-rdma adds \(f(.runtime.added_ms)) ms per pod (its ADD and two DELs; difference of the" +
		  " medians; median of the \(.runtime.rows[0].cycles) pairs: \(f(.runtime.added_paired_ms)) ms);" +
		  " the iproute2 floor of the same move, between them: \(f(.runtime.floor_ms)) ms (\(r3(.runtime.vs_floor)))" +
		  (if .runtime.added_ms <= 0 then "; not a figure: below this run\u0027s noise" else "" end) else empty end),
		 (if .runtime.passthrough_added_ms then
		  "hpn-rdma passing a pod through (no move) adds \(f(.runtime.passthrough_added_ms)) ms: containerd running" +
		  " one more plugin of the chain, three times" else empty end),
		 "" end),
		((.runtime.others // [])[] | if .skipped then "Runtime rows skipped: " + .skipped, "" else
		 "The same through containerd \(.containerd) (CNI \(.cniVersion)):",
		 (.rows[] | (.row | pad(28)) + (f(.wall_ms.median) | lpad(10)) + (f(.wall_ms.p99) | lpad(9)) +
		  (f(.run_ms) | lpad(8)) + (f(.stop_ms) | lpad(8)) + (f(.remove_ms) | lpad(8))),
		 (if .added_ms then
		  "hpn-rdma adds \(f(.added_ms)) ms per pod (median of the pairs: \(f(.added_paired_ms)) ms);" +
		  " the iproute2 floor between them: \(f(.floor_ms)) ms (\(r3(.vs_floor)))" +
		  (if .added_ms <= 0 then "; not a figure: below this run\u0027s noise" else "" end) else empty end),
		 "" end),
		(if .nri.skipped then "NRI rows skipped: " + .nri.skipped, "" elif .nri.rows then
		 "A container through containerd \(.nri.containerd)\u0027s NRI (\(.nri.rounds) per row, rows alternating by round;" +
		 " each call as containerd logged it; the client\u0027s wall, hpn-cri\u0027s start included, apart;" +
		 " nri.memlock \(.nri.memlock))",
		 ("row (medians, ms)" | pad(28)) + ("Create" | lpad(8)) + ("Start" | lpad(8)) + ("both" | lpad(8)) +
		 ("both p99" | lpad(10)) + ("client" | lpad(8)),
		 ((.nri.rows + [.nri.first_after_register | .row = "(first after registering)"])[] |
		  (.row | pad(28)) + (f(.create_ms.median) | lpad(8)) + (f(.start_ms.median) | lpad(8)) +
		  (f(.total_ms.median) | lpad(8)) + (f(.total_ms.p99) | lpad(10)) + (f(.client_ms.total) | lpad(8))),
		 (.nri.added_on // empty | "hpn-rdma-agent\u0027s NRI plugin adds \(f(.total_ms)) ms to a container of an attached pod" +
		  " (CreateContainer \(f(.create_ms)), StartContainer \(f(.start_ms)); median of the rounds\u0027 pairs" +
		  " \(f(.paired_total_ms)); the client\u0027s \(f(.client_total_ms))): its devices, /etc/nccl.conf, RLIMIT_MEMLOCK" +
		  (if .total_ms <= 0 then "; not a figure: below this run\u0027s noise" else "" end)),
		 (.nri.added_other // empty | "  and \(f(.total_ms)) ms to a container of another pod (CreateContainer \(f(.create_ms))," +
		  " StartContainer \(f(.start_ms)); pairs \(f(.paired_total_ms))): one call, nothing adjusted"),
		 (.nri.first_after_register.added // empty | "  the first container after the agent registers: \(f(.total_ms)) ms" +
		  " (CreateContainer \(f(.create_ms)))"),
		 (.nri.agent | "The agent\u0027s CPU per container it answered (its threads\u0027 run time; utime+stime, counted" +
		  " in whole clock ticks, in brackets): adjusted \(f(.cpu_ms_per_adjusted.schedstat)) ms" +
		  " (\(f(.cpu_ms_per_adjusted.ticks))), another pod\u0027s \(f(.cpu_ms_per_untouched.schedstat)) ms" +
		  " (\(f(.cpu_ms_per_untouched.ticks))), the first after registering \(f(.cpu_ms_first_adjusted.schedstat))" +
		  " ms (\(f(.cpu_ms_first_adjusted.ticks))); its metrics: \(.adjusted) containers adjusted, \(.untouched)" +
		  " untouched, \(.calls) NRI calls"), ""
		 else empty end),
		(if .agent.allocate then
		 "hpn-rdma-agent through the kubelet stand-in (\(.agent.allocate.calls) calls each): Allocate of one NIC" +
		 " \(f(.agent.allocate.median_ms)) ms median, \(f(.agent.allocate.p99_ms)) ms p99; ListAndWatch to its first" +
		 " list \(f(.agent.listwatch.median_ms)) ms median, \(f(.agent.listwatch.p99_ms)) ms p99",
		 "ADD+DEL with the allocation lookup (move.*.hpn-agent) minus the pool path (move.*.hpn-rdma):" +
		 " \(f(.agent.lookup_added_ms.none)) ms without IPAM, \(f(.agent.lookup_added_ms.static)) ms with static", ""
		 elif .agent.skipped then "Agent rows skipped: " + .agent.skipped, "" else empty end),
		(if .dra.prepare then
		 "hpn-rdma-agent as a DRA driver (--dra; the API: \(.dra.server)):",
		 (if .dra.prepare.failed then "  Prepare latency FAILED: \(.dra.prepare.failed)" else
		  "  Prepare of a claim of one NIC (\(.dra.prepare["prepare-api"].calls) rounds, through the kubelet stand-in):" +
		  " the claim read from the API \(f(.dra.prepare["prepare-api"].median_ms)) ms median, \(f(.dra.prepare["prepare-api"].p99_ms)) ms p99;" +
		  " answered from its record \(f(.dra.prepare["prepare-record"].median_ms)) ms, \(f(.dra.prepare["prepare-record"].p99_ms)) ms;" +
		  " Unprepare \(f(.dra.prepare.unprepare.median_ms)) ms, \(f(.dra.prepare.unprepare.p99_ms)) ms" end),
		 (if .dra.slices.changes then
		  "  ResourceSlices: the pool grown from \(.dra.slices.base_nics) to \(.dra.slices.pool_nics) NICs and back, \(.dra.slices.changes) changes:" +
		  " in the API \(f(.dra.slices.grow_ms.median)) ms after it grew, \(f(.dra.slices.shrink_ms.median)) ms after it shrank" +
		  " (medians; the 200 ms debounce of the agent and its scan included); the agent wrote \(.dra.slices.slices_written) slices" +
		  " in \(.dra.slices.rounds_written) rounds, \(f(.dra.slices.round_ms)) ms a round, \(f(.dra.slices.slices_per_s)) slices/s"
		  else "  ResourceSlices: \(.dra.slices.failed // .dra.slices.skipped // "not measured")" end),
		 (if .dra.added_vs_pool then
		  "  ADD+DEL with a DRA claim (dra.none.hpn-dra) minus the pool (move.none.hpn-rdma): \(f(.dra.added_vs_pool.wall_ms)) ms wall," +
		  " \(f(.dra.added_vs_pool.cpu_ms)) ms CPU" +
		  (if .dra.added_vs_device_plugin then "; minus the allocation of the device plugin (move.none.hpn-agent): \(f(.dra.added_vs_device_plugin.wall_ms)) ms wall, \(f(.dra.added_vs_device_plugin.cpu_ms)) ms CPU" else "" end)
		  else empty end), ""
		 elif .dra.skipped then "DRA rows skipped: " + .dra.skipped, "" else empty end),
		(if .rdma_discovery.us_per_add then
		 "RDMA discovery of one netdev (ADD with rdmaRequired:false; /sys/class/infiniband " +
		 .rdma_discovery.sys_class_infiniband + "): \(f(.rdma_discovery.us_per_add / 1000)) ms per ADD, found: " +
		 .rdma_discovery.rdma_device, "" else empty end),
		(if .rdma_discovery.qos_read then
		 "RoCE QoS read of one netdev (what ADD adds per RoCE NIC with nccl on; DCB " +
		 .rdma_discovery.qos_read.dcb + "): \(f(.rdma_discovery.qos_read.us_per_add / 1000)) ms per ADD", "" else empty end),
		(if .gpu_choice.rows then
		 "GPU-aware NIC choice (test/fixtures/gpu-nodes, every pod shape, one NIC per GPU): GPUs given a PIX or PXB NIC, and a NIC on their NUMA node (PHB or nearer)",
		 ("node" | pad(12)) + ("GPUs/pod" | lpad(9)) + ("pods" | lpad(6)) + ("GPUs" | lpad(6)) +
		 ("gpu-aware" | lpad(11)) + ("first-match" | lpad(13)) + ("aware<=PHB" | lpad(12)) + ("first<=PHB" | lpad(12)),
		 (.gpu_choice.rows[] | (.node | pad(12)) + (.gpus_per_pod | lpad(9)) + (.pods | lpad(6)) +
		  (.gpus | lpad(6)) + ((.near_gpu_aware / .gpus * 1000 | round / 10 | tostring) + "%" | lpad(11)) +
		  ((.near_first_match / .gpus * 1000 | round / 10 | tostring) + "%" | lpad(13)) +
		  ((.numa_gpu_aware / .gpus * 1000 | round / 10 | tostring) + "%" | lpad(12)) +
		  ((.numa_first_match / .gpus * 1000 | round / 10 | tostring) + "%" | lpad(12))),
		 ("overall" | pad(12)) + ("" | lpad(15)) + (.gpu_choice.overall.gpus | lpad(6)) +
		 ((.gpu_choice.overall.near_gpu_aware / .gpu_choice.overall.gpus * 1000 | round / 10 | tostring) + "%" | lpad(11)) +
		 ((.gpu_choice.overall.near_first_match / .gpu_choice.overall.gpus * 1000 | round / 10 | tostring) + "%" | lpad(13)) +
		 ((.gpu_choice.overall.numa_gpu_aware / .gpu_choice.overall.gpus * 1000 | round / 10 | tostring) + "%" | lpad(12)) +
		 ((.gpu_choice.overall.numa_first_match / .gpu_choice.overall.gpus * 1000 | round / 10 | tostring) + "%" | lpad(12)) +
		 "   (hpn_gpu_assign: \(f(.gpu_choice.overall.assign_us_per_pod)) us a pod)", ""
		 elif .gpu_choice.skipped then "GPU choice row skipped: " + .gpu_choice.skipped, "" else empty end),
		"Targets",
		(.targets[] | "  [\(if .met == true then "met" elif .met == false then "NOT met" else "?" end)] " +
		 if .unit then "\(.target): \(f(.value)) \(.unit) (limit \(.limit) \(.unit))" else
		 "\(.target): \(r3(.value)) (limit \(.limit)x\(if .floor then "; floor here \(r3(.floor))" else "" end))" end),
		(if .kernel_floor.cpu_ms then
		 "  floor: CPU = 2 starts of /bin/true (\(f(.kernel_floor.process_start_cpu_ms)) ms each) + the kernel work" +
		 " of move, up, move back (\(f(.kernel_floor.cpu_ms)) ms, hpn-bench-kernel), both taken between the" +
		 " rounds of the serial rows; VERSION = /bin/true" else empty end),
		"",
		(if .vm.floor then
		 "RDMA in the VM (kernel \(.vm.kernel), QEMU TCG, one boot of \(.vm.boot_and_run_s // "?") s): ib_write_bw pod to pod," +
		 " \(.vm.messages_per_run) x 64 KiB, \(.vm.runs) runs, MB/s",
		 ("path" | pad(28)) + ("median" | lpad(10)) + "   runs",
		 (.vm.floor | to_entries[] | ("floor, " + .key | pad(28)) + (f(.value.median) | lpad(10)) +
		  "   " + (.value.mb_s | map(tostring) | join(" "))),
		 (if .vm.hpn.virtio then
		  ("hpn-rdma (softRoce), virtio" | pad(28)) + (f(.vm.hpn.virtio.median) | lpad(10)) + "   " +
		  (.vm.hpn.virtio.mb_s | map(tostring) | join(" ")) + "   (\(r3(.vm.hpn.vs_floor)) of the floor)",
		  "ADD and DEL in the VM (static IPAM, one virtio NIC, \(.vm.hpn.add_ms.adds) of each in turn), ms",
		  ("" | pad(28)) + ("ADD median" | lpad(12)) + ("DEL median" | lpad(12)) + "   ADD runs",
		  ("with the RDMA proof (softRoce)" | pad(28)) + (f(.vm.hpn.add_ms.softroce.median) | lpad(12)) +
		  (f(.vm.hpn.del_ms.softroce.median) | lpad(12)) + "   " + (.vm.hpn.add_ms.softroce.ms | map(tostring) | join(" ")),
		  ("rdmaRequired false" | pad(28)) + (f(.vm.hpn.add_ms.plain.median) | lpad(12)) +
		  (f(.vm.hpn.del_ms.plain.median) | lpad(12)) + "   " + (.vm.hpn.add_ms.plain.ms | map(tostring) | join(" ")),
		  "  (the proof adds \(f(.vm.hpn.add_ms.softroce.median - .vm.hpn.add_ms.plain.median)) ms to ADD here: the rxe made in the pod, port and GID waited for, the bind)",
		  (.vm.hpn.pool8 // empty | . as $p |
		   "A pod of 1 and of 8 NICs from a pool of 8 veth pairs (host-local), ms: ADD, DEL (medians), each ADD",
		   (["1", "softroce", "1 NIC, with its proof"], ["1", "plain", "1 NIC, rdmaRequired false"],
		    ["8", "softroce", "8 NICs, 8 proofs"], ["8", "plain", "8 NICs, rdmaRequired false"] |
		    $p[.[0]][.[1]] as $x | (.[2] | pad(28)) + (f($x.add_median) | lpad(12)) +
		    (f($x.del_median) | lpad(12)) + "   " + ($x.add_ms // [] | map(tostring) | join(" "))),
		   "  (8 NICs with proofs: \(r($p.add8_vs_base)) of 1 with its proof plus the 7 more without, \(f($p.add8_base_ms)) ms; target 1.5x)")
		  else "  hpn-rdma: \(.vm.hpn.skipped // "not measured")" end), ""
		 elif .vm.skipped and (.vm.skipped | test("not requested") | not) then "VM section skipped: \(.vm.skipped)", ""
		 elif .vm.failed then "VM section FAILED: \(.vm.failed)", ""
		 else empty end),
		"hd: host-device (move) or macvlan (shared); ip: the iproute2 floor of the same mode and IPAM.",
		"Machine: \(.machine.cores) cores \(.machine.cpu), kernel \(.machine.kernel), stateDir on \(.machine.state_fs), hints on \(.machine.hints_fs); load after: \(.machine.loadavg_after)",
		(if .kernel_floor.cpuid_us then
		 "One CPUID costs \(f(.kernel_floor.cpuid_us)) us here (a VM exit on a VM); glibc runs dozens at every process start." else empty end)
		' "$JSON"
	echo "JSON: $JSON"
}

# report_check: --check.
report_check() {
	local want_rows vp
	# Every row, VERSION and parallel figure present and numeric: not timings.
	want_rows=$(printf '%s\n' "${ROWS[@]}" | jq -R . | jq -sc .)
	vp=$(printf '%s\n' "${VPLUGINS[@]}" | jq -R . | jq -sc .)
	jq -e --argjson want "$want_rows" --argjson vp "$vp" --arg par "$PAR" \
		--argjson rtcyc "$RT_ITER" \
		--argjson cyc $((PER_ROUND * ROUNDS)) --argjson vcyc $(((VITER + ROUNDS - 1) / ROUNDS * ROUNDS)) '
		([.serial[].row] | sort) == ($want | sort) and
		all(.serial[]; .skipped or (.cycles == $cyc and (.wall_ms.median > 0) and
			(.cpu_ms | type == "number") and .peak_rss_kb > 0)) and
		([.version[].plugin] | sort) == ($vp | sort) and
		all(.version[]; .runs == $vcyc and .wall_ms.median > 0) and
		(.parallel | length) == (($par | split(" ") | map(select(. != "")) | length) *
			([.serial[] | select((.skipped | not) and (.row | test("^(kube|move8|dra)\\.") | not))] |
			 length)) and
		# The 8-NIC pod held against each floor that was measured.
		(([.serial[] | select(.row == "move8.none.hpn-rdma" and (.skipped | not))] | length) == 0 or
			((.pod8.hpn_rdma_ms > 0) and
			 (.kernel_floor.skipped or .pod8.vs_kernel_8x > 0) and
			 (([.serial[].row] | index("move8.none.iproute2")) == null or .pod8.vs_iproute2_8_moves > 0) and
			 (([.serial[].row] | index("move.none.iproute2")) == null or .pod8.vs_iproute2_8x_one_move > 0))) and
		# Not a timing: the annotation path asks nothing, the label path once per ADD.
		(.kubernetes.skipped or ((.kubernetes.rows | map({(.row): .requests_per_add}) | add) as $q |
			$q["kube.none.hpn-kanno"] == 0 and $q["kube.none.hpn-klabel"] == 1 and
			($q["kube.none.hpn-kagent"] // 0) == 0)) and
		all(.parallel[]; .reps == '"$PAR_REPS"' and .pods_per_s > 0) and
		# A pair for each variant with both of its move rows, every cycle in it.
		((.pairs | map(.variant) | sort) == ([.serial[] | select(.skipped | not) | .row |
			select(test("^move\\.[a-z]+\\.(hpn-rdma|host-device)$")) | split(".")[1]] |
			group_by(.) | map(select(length == 2)[0]) | sort)) and
		all(.pairs[]; .cycles == $cyc and .hpn_rdma_ms > 0 and .host_device_ms > 0) and
		(.kernel_floor.skipped or .kernel_floor.cpu_ms > 0) and
		(.agent.skipped or (.agent.allocate.median_ms > 0 and .agent.listwatch.median_ms > 0)) and
		# The DRA figures, each a count of what happened, present.
		(.dra.skipped or (.dra.prepare["prepare-api"].calls == '"$AG_ITER"' and
			.dra.prepare["prepare-record"].median_ms > 0 and .dra.prepare.unprepare.median_ms > 0 and
			.dra.slices.changes == '"$((2 * DRA_CHANGES))"' and .dra.slices.slices_written > 0 and
			.dra.slices.slices_per_s > 0)) and
		# Not a timing: every node and shape counted, and gpu-aware never worse.
		(.gpu_choice.skipped or ((.gpu_choice.rows | length) == 14 and
			all(.gpu_choice.rows[]; .gpus > 0 and .near_gpu_aware >= .near_first_match and
				.numa_gpu_aware >= .numa_first_match))) and
		('"$VM"' == 0 or .vm.skipped or (.vm.floor.virtio.median > 0 and .vm.floor.veth.median > 0 and
			.vm.hpn.virtio.median > 0 and .vm.hpn.add_ms.softroce.median > 0 and
			.vm.hpn.add_ms.plain.median > 0)) and
		# Every container of the NRI rows made and checked, each the agent answered counted.
		(.nri.skipped or ((.nri.rows | length) == 3 and
			all(.nri.rows[]; .containers == $rtcyc and .total_ms.median > 0 and .create_ms.median > 0) and
			.nri.agent.adjusted == 2 * $rtcyc and .nri.agent.untouched == $rtcyc and
			(.nri.added_on.total_ms | type == "number") and
			(.nri.agent.cpu_ms_per_adjusted.schedstat | type == "number"))) and
		(.runtime.skipped or ((.runtime.rows | length) == 3 and
			all(.runtime.rows[]; .cycles == $rtcyc and .wall_ms.median > 0) and
			(.runtime.added_ms | type == "number"))) and
		all(.targets[]; .met != null)' "$JSON" >/dev/null || {
		echo "FAIL: $JSON lacks rows or figures" >&2
		exit 1
	}
	echo "PASS: every row measured, JSON valid"
}
