# Declared streams (queen_streams.create_stream) run by the server's stream
# workers: every closed window equals the same aggregation computed in plain
# SQL over the pushed events (event time with late events and a filter,
# processing time with hopping windows, sessions), across a kill -9 of the
# postmaster mid-processing; and a declared stream emits exactly the windows
# examples/window_counter.pl emits for the same events.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IPC::Run;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = qs_node('declared', <<'EOF');
queen_streams.stream_workers = 2
queen_streams.stream_poll_interval = 200
EOF
my $url = "http://127.0.0.1:$node->{qs_http_port}";

is($node->safe_psql('postgres', 'SELECT count(*) FROM queen_streams.stream_workers()'),
	'2', 'two stream workers run');

# ---- the events, kept in a plain table to compute the answers from
my $base = 1_700_000_040_000;
srand(7);
my @rows;
my $n = 3000;
my @ts = sort { $a <=> $b } map { $base + int(rand(8 * 60_000)) } 1 .. $n;
for my $i (0 .. $n - 1)
{
	my $part = (qw(p1 p2 p3))[ int(rand(3)) ];
	my $cust = (qw(acme bolt core dyne))[ int(rand(4)) ];
	my $ts = $ts[$i];
	# every 150th event is an hour late (after its partition has seen later ones)
	$ts = $base - 3_600_000 + $i if $i >= 300 && $i % 150 == 0;
	my $amount = int(rand(100)) - 5;	# some <= 0: left out by the filter
	my $user = 'u' . int(rand(25));
	push @rows, "($i, '$part', '$cust', $ts, $amount, '$user')";
}
$node->safe_psql('postgres', <<"EOF");
CREATE TABLE ev (seq int PRIMARY KEY, part text, customer text, ts bigint, amount int, usr text);
INSERT INTO ev VALUES @{[ join(",\n", @rows) ]};
CREATE FUNCTION iso(ms bigint) RETURNS text LANGUAGE sql IMMUTABLE AS
  \$\$ SELECT to_char(to_timestamp(ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') \$\$;
EOF

# pushed in order, 40 a push, one transaction each
for (my $c = 0; $c * 40 < $n; $c++)
{
	$node->safe_psql('postgres', <<"EOF");
SELECT queen.push(jsonb_build_object('items', jsonb_agg(jsonb_build_object(
	'queue', 'orders', 'partition', part,
	'payload', jsonb_build_object('customer', customer, 'ts', ts, 'amount', amount, 'user', usr))
	ORDER BY seq))) FROM ev WHERE seq / 40 = $c;
EOF
}

# ---- three declared streams over the backlog
my $lit = sub { (my $s = JSON::PP->new->canonical->encode($_[0])) =~ s/'/''/g; "'$s'" };
my $per_minute = {
	source => 'orders', sink => 'orders.per_minute',
	filter => '$.amount > 0', key => '$.customer',
	window => { type => 'tumbling', size => 60 },
	time => { type => 'event', path => '$.ts', late => 'queue', late_queue => 'orders.late' },
	aggregates => {
		count => { fn => 'count' }, total => { fn => 'sum', path => '$.amount' },
		lo => { fn => 'min', path => '$.amount' }, hi => { fn => 'max', path => '$.amount' },
		mean => { fn => 'avg', path => '$.amount' }, first => { fn => 'first', path => '$.amount' },
		last => { fn => 'last', path => '$.amount' }, users => { fn => 'count_distinct', path => '$.user' } },
	batch => 1, lease => 2, partitions => 2, idle_flush => 1 };
my $sessions = {
	source => 'orders', sink => 'orders.sessions', key => '$.customer',
	window => { type => 'session', gap => 20 },
	time => { type => 'event', path => '$.ts' },
	aggregates => { n => { fn => 'count' }, total => { fn => 'sum', path => '$.amount' } },
	batch => 50, lease => 2, idle_flush => 1 };
my $hopping = {
	source => 'orders', sink => 'orders.hopping', key => 'partition',
	window => { type => 'hopping', size => 120, slide => 30, grace => 10 },
	time => { type => 'event', path => '$.ts', lateness => 3600 },
	aggregates => { n => { fn => 'count' }, total => { fn => 'sum', path => '$.amount' } },
	batch => 30, lease => 2, idle_flush => 1 };
for my $s ([ 'orders.per_minute', $per_minute ], [ 'orders.sessions', $sessions ],
	[ 'orders.hopping', $hopping ])
{
	my $r = $node->safe_psql('postgres',
		"SELECT queen_streams.create_stream('$s->[0]', " . $lit->($s->[1]) . ")->>'success'");
	is($r, 'true', "create_stream $s->[0]");
}

# ---- kill -9 the postmaster while the per-minute stream is halfway. One
# event a cycle: the stream needs at least 3,000 cycles (each commit counts
# one), so fewer at the kill prove it was not done. With 5 a cycle the bound
# was 600, too tight: a kill once came after 602.
ok($node->poll_query_until('postgres',
	"SELECT coalesce(sum(cycles), 0) >= 40 FROM queen_streams.stream_status('orders.per_minute')"),
	'the stream workers commit cycles');
my $before = $node->safe_psql('postgres',
	"SELECT sum(cycles) FROM queen_streams.stream_status('orders.per_minute')");
my $pm_pid = $node->{_pid};
$node->kill9;
# the orphaned children leave once they see the postmaster gone
for (1 .. 100) { last unless kill 0, $pm_pid; usleep(100_000); }
my $started;
for (1 .. 50)
{
	last if ($started = $node->start(fail_ok => 1));
	usleep(200_000);
}
ok($started, 'the server restarts after kill -9');
note("killed after $before cycles");
cmp_ok($before, '<', $n, 'the crash came before the per-minute stream was done');

my $done = sub {
	my ($name) = @_;
	return $node->poll_query_until('postgres', <<"EOF");
SELECT count(*) > 0 AND bool_and(lag = 0 AND open_windows = 0)
  FROM queen_streams.stream_status('$name') WHERE partition_id <> '00000000-0000-0000-0000-000000000000'
EOF
};
ok($done->($_), "$_ ran to the end after the restart")
  for qw(orders.per_minute orders.sessions orders.hopping);

# Drain a sink into a table: (partition, payload).
sub drain
{
	my ($queue, $table) = @_;
	$node->safe_psql('postgres', "CREATE TABLE \"$table\" (part text, data jsonb)");
	while (1)
	{
		my $got = $node->safe_psql('postgres', <<"EOF");
WITH b AS (SELECT queen.pop('$queue', consumer_group => 'check', batch => 1000, auto_ack => true,
                            partitions => 10) AS r),
ins AS (INSERT INTO "$table" SELECT m->>'partition', m->'data'
          FROM b, jsonb_array_elements(b.r->'messages') m RETURNING 1)
SELECT count(*) FROM ins
EOF
		last if $got == 0;
	}
}

# Rows of one query missing from the other, both ways (multisets).
sub differences
{
	my ($want, $got) = @_;
	return $node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM (($want) EXCEPT ALL ($got)) a)"
		  . " + (SELECT count(*) FROM (($got) EXCEPT ALL ($want)) b)");
}

# ---- per minute: event time, filter, late events to the late queue
drain('orders.per_minute', 'got_minute');
drain('orders.late', 'got_late');
my $late_sql = <<'EOF';
SELECT *, amount > 0 AS passes,
       ts < max(ts) FILTER (WHERE amount > 0) OVER (PARTITION BY part ORDER BY seq
             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS late
  FROM ev
EOF
my $want_minute = <<"EOF";
SELECT part, jsonb_build_object('key', customer, 'windowStart', iso(w), 'windowEnd', iso(w + 60000),
	'count', count(*), 'total', sum(amount), 'lo', min(amount), 'hi', max(amount),
	'mean', avg(amount::numeric), 'first', (array_agg(amount ORDER BY ts, seq))[1],
	'last', (array_agg(amount ORDER BY ts DESC, seq DESC))[1], 'users', count(DISTINCT usr))
  FROM (SELECT *, floor(ts / 60000.0)::bigint * 60000 AS w FROM ($late_sql) l) e
 WHERE passes AND late IS NOT TRUE
 GROUP BY part, customer, w
EOF
my $nwant = $node->safe_psql('postgres', "SELECT count(*) FROM ($want_minute) w");
cmp_ok($nwant, '>', 50, "$nwant per-minute windows expected");
is(differences($want_minute, 'SELECT part, data FROM got_minute'), '0',
	'every per-minute window is exact: none lost, none twice, every aggregate as SQL has it');
is(differences(
	"SELECT part, jsonb_build_object('customer', customer, 'ts', ts, 'amount', amount, 'user', usr)"
	  . " FROM ($late_sql) l WHERE passes AND late",
	'SELECT part, data FROM got_late'), '0', 'the late events went to the late queue, once each');
is($node->safe_psql('postgres', 'SELECT count(*) FROM got_late'),
	$node->safe_psql('postgres', "SELECT count(*) FROM ($late_sql) l WHERE passes AND late"),
	'late count');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM got_late'), '>', 5, 'some events were late');

# ---- sessions (gap 20 s), late events dropped
drain('orders.sessions', 'got_sessions');
my $want_sessions = <<'EOF';
WITH l AS (
	SELECT *, ts < max(ts) OVER (PARTITION BY part ORDER BY seq
	            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS late FROM ev),
a AS (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY part, customer ORDER BY ts, seq) < 20000
                     THEN 0 ELSE 1 END AS starts
        FROM l WHERE late IS NOT TRUE),
s AS (SELECT *, sum(starts) OVER (PARTITION BY part, customer ORDER BY ts, seq) AS sid FROM a)
SELECT part, jsonb_build_object('key', customer, 'windowStart', iso(min(ts)),
	'windowEnd', iso(max(ts) + 20000), 'n', count(*), 'total', sum(amount))
  FROM s GROUP BY part, customer, sid
EOF
is(differences($want_sessions, 'SELECT part, data FROM got_sessions'), '0',
	'every session window is exact');

# ---- hopping (120 s every 30 s, grace 10 s, lateness an hour): a late event
# still lands in its windows while they are open, else it is dropped
drain('orders.hopping', 'got_hopping');
# The watermark walk is sequential: compute it in Perl from the same rows, then
# the windows in SQL from the accepted (event, window) pairs.
my %wm;
my @accepted;
for my $line (split /\n/, $node->safe_psql('postgres', 'SELECT seq, part, ts FROM ev ORDER BY seq'))
{
	my ($seq, $part, $ts) = split /\|/, $line;
	my $wm = $wm{$part};
	if (defined $wm && $ts < $wm - 3_600_000) { next; }
	my @win;
	for (my $s = POSIX::floor($ts / 30_000) * 30_000; $s > $ts - 120_000; $s -= 30_000)
	{
		push @win, $s unless defined $wm && $s + 120_000 + 10_000 <= $wm;
	}
	next unless @win;
	push @accepted, map { "($seq, $_)" } @win;
	$wm{$part} = $ts if !defined $wm || $ts > $wm;
}
$node->safe_psql('postgres', "CREATE TABLE hop_acc (seq int, w bigint); INSERT INTO hop_acc VALUES "
	  . join(',', @accepted));
my $want_hop = <<'EOF';
SELECT e.part, jsonb_build_object('key', e.part, 'windowStart', iso(h.w), 'windowEnd', iso(h.w + 120000),
	'n', count(*), 'total', sum(e.amount))
  FROM hop_acc h JOIN ev e USING (seq) GROUP BY e.part, h.w
EOF
is(differences($want_hop, 'SELECT part, data FROM got_hopping'), '0',
	'every hopping window is exact (late events inside the lateness folded into open windows)');

# ---- processing time: windows over the broker's createdAt, from live pushes
is($node->safe_psql('postgres', "SELECT queen_streams.create_stream('pings.per_second', "
	  . $lit->({ source => 'pings', sink => 'pings.per_second', key => '$.k',
		window => { type => 'tumbling', size => 1 }, time => { type => 'processing' },
		aggregates => { n => { fn => 'count' }, total => { fn => 'sum', path => '$.v' } },
		idle_flush => 5 }) . ")->>'success'"), 'true', 'a processing-time stream');
for my $round (0 .. 5)
{
	my @p = map { { queue => 'pings', partition => "q$_", payload => { k => "k" . ($_ % 2), v => $round * 10 + $_ } } } 0 .. 5;
	my ($s) = http_json($node, 'POST', '/api/v1/push', { items => \@p });
	die "push failed: $s" unless $s == 201;
	usleep(400_000);
}
ok($done->('pings.per_second'), 'the processing-time stream ran to the end (idle flush)');
drain('pings.per_second', 'got_pings');
$node->safe_psql('postgres', <<'EOF');
CREATE TABLE pings AS
SELECT m->>'partition' AS part, m->'data'->>'k' AS k, (m->'data'->>'v')::int AS v,
       floor(extract(epoch FROM (m->>'createdAt')::timestamptz) * 1000)::bigint AS ms
  FROM jsonb_array_elements(queen.pop('pings', consumer_group => 'audit', batch => 1000,
                                      auto_ack => true, partitions => 10)->'messages') m
EOF
is($node->safe_psql('postgres', 'SELECT count(*) FROM pings'), '36', 'all pings read back');
is(differences(<<'EOF', 'SELECT part, data FROM got_pings'), '0', 'every processing-time window is exact');
SELECT part, jsonb_build_object('key', k, 'windowStart', iso(w), 'windowEnd', iso(w + 1000),
	'n', count(*), 'total', sum(v))
  FROM (SELECT *, floor(ms / 1000.0)::bigint * 1000 AS w FROM pings) p GROUP BY part, k, w
EOF

# ---- status, HTTP and metrics
my $st = $node->safe_psql('postgres', <<'EOF');
SELECT sum(events), sum(filtered), sum(late), sum(windows_emitted) FROM queen_streams.stream_status('orders.per_minute')
EOF
my ($events, $filtered, $late, $windows) = split /\|/, $st;
is($events, $n, 'stream_status: every event folded once (committed cycles only)');
is($filtered, $node->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE amount <= 0'),
	'stream_status: filtered events');
is($windows, $nwant, 'stream_status: windows emitted');
my ($hs, $doc) = http_json($node, 'GET', '/streams/v1/streams');
is($hs, 200, 'GET /streams/v1/streams');
is_deeply([ sort map { $_->{name} } @{ $doc->{streams} } ],
	[qw(orders.hopping orders.per_minute orders.sessions pings.per_second)], 'it lists the declared streams');
my ($pm) = grep { $_->{name} eq 'orders.per_minute' } @{ $doc->{streams} };
is(scalar(grep { defined $_->{partition} } @{ $pm->{partitions} }), 3, 'with their three partitions');
my (undef, $metrics) = http($node, 'GET', '/metrics');
like($metrics, qr/^queen_streams_stream_windows_total [1-9]\d*$/m, '/metrics counts windows');
like($metrics, qr/^queen_streams_stream_workers_up 2$/m, '/metrics: stream workers up');
like($metrics, qr/^queen_streams_queue_acked_messages_total\{[^}]*queue="pings"\} 36$/m,
	'/metrics: the stream workers\' acks count on the source queue, once each');
like($metrics, qr/^queen_streams_queue_cycles_total\{[^}]*queue="pings"\} [1-9]/m,
	'/metrics: and their cycles');

# ---- the example worker and a declared stream: the same windows
my @items;
for my $i (0 .. 399)
{
	push @items, { queue => 'clicks', partition => (qw(a b))[ $i % 2 ],
		payload => { key => (qw(x y z))[ $i % 3 ], ts => $base + $i * 700 } };
}
while (my @chunk = splice(@items, 0, 50))
{
	my ($ps) = http_json($node, 'POST', '/api/v1/push', { items => \@chunk });
	die "push failed: $ps" unless $ps == 201;
}
is($node->safe_psql('postgres', "SELECT queen_streams.create_stream('clicks.declared', "
	  . $lit->({ source => 'clicks', sink => 'clicks.declared', key => '$.key',
		window => { type => 'tumbling', size => 60 }, time => { type => 'event', path => '$.ts' },
		aggregates => { count => { fn => 'count' } }, batch => 13, idle_flush => 1 }) . ")->>'success'"),
	'true', 'a declared tumbling count over the example worker\'s source');
my ($out, $err);
IPC::Run::run([ $^X, "$FindBin::Bin/../../examples/window_counter.pl", '--url', $url,
	'--source', 'clicks', '--sink', 'clicks.sdk', '--batch', '13', '--idle-flush', '1',
	'--exit-idle', '3' ], '>', \$out, '2>', \$err, IPC::Run::timeout(120))
  or diag "example worker: $err";
ok($done->('clicks.declared'), 'the declared stream ran to the end');
drain('clicks.sdk', 'got_sdk');
drain('clicks.declared', 'got_declared');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM got_sdk'), '>=', 10, 'the example emitted windows');
is(differences('SELECT part, data FROM got_sdk', 'SELECT part, data FROM got_declared'), '0',
	'the example worker and the declared stream emit the same windows');
is($node->safe_psql('postgres', <<'EOF'),
SELECT count(*) FROM queen_streams.state s JOIN queen_streams.queries q ON q.id = s.query_id
 WHERE q.name IN ('clicks.sdk', 'clicks.declared') AND s.key <> '__wm__'
EOF
	'0', 'both left no open window');

# ---- pause, resume, drop
is($node->safe_psql('postgres', "SELECT queen_streams.pause_stream('clicks.declared')->>'paused'"),
	'true', 'pause_stream');
my ($ps) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'clicks', partition => 'a', payload => { key => 'x', ts => $base } } ] });
usleep(1_500_000);
is($node->safe_psql('postgres',
	"SELECT sum(lag) FROM queen_streams.stream_status('clicks.declared')"), '1',
	'a paused stream does not consume');
$node->safe_psql('postgres', "SELECT queen_streams.resume_stream('clicks.declared')");
ok($node->poll_query_until('postgres',
	"SELECT sum(lag) = 0 FROM queen_streams.stream_status('clicks.declared')"), 'resumed, it consumes');
$node->safe_psql('postgres', "SELECT queen_streams.drop_stream('clicks.declared')");
is($node->safe_psql('postgres',
	"SELECT count(*) FROM queen_streams.queries WHERE name = 'clicks.declared'"), '0',
	'drop_stream drops its query');

$node->stop;
done_testing();
