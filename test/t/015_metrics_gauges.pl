# The gauges of GET /metrics (issue 40) equal what SQL computes on its own
# after push/pop/ack/nack/dead-letter/stream workloads: per queue and
# consumer group the backlog, the partitions with a backlog, the leased
# partitions, the dead letters and the lag in seconds; per declared stream
# its lag, open windows, late events and errors. queen.queue_stats() (the
# view queen_streams.queue_stats) gives the same rows. With tenancy on, a
# tenant's scrape shows its own rows only. The label cardinality is bounded
# by queen_streams.metrics_queues, the rest summed into "(other)": a queue
# whose group rows are all folded keeps its own queue series, and
# queen_streams_gauges_folded_rows counts what was folded. These nodes read
# the tables at every scrape (metrics_gauges_interval = 0), to compare with
# SQL right after each step; 016 tests the snapshot scrapes read by default.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $lit = sub { (my $s = JSON::PP->new->canonical->encode($_[0])) =~ s/'/''/g; "'$s'" };

# name => { "label=value,…" (sorted) => value }
sub scrape
{
	my ($node, $headers) = @_;
	my ($st, $text) = http($node, 'GET', '/metrics', undef, $headers);
	die "GET /metrics: $st" unless $st == 200;
	my %m;
	for my $line (split /\n/, $text)
	{
		next if $line =~ /^#/;
		$line =~ /^(\w+)(?:\{(.*)\})? (\S+)$/ or die "unparsable line: $line";
		my ($name, $labels, $v) = ($1, $2 // '', $3);
		my @l = sort map { /^(\w+)="(.*)"$/ ? "$1=$2" : die "bad label $_" } split /,(?=\w+=")/, $labels;
		$m{$name}{ join(',', @l) } = $v;
	}
	return \%m;
}

sub gkey { my ($t, $q, $g) = @_; return "consumer_group=$g,queue=$q,tenant=$t"; }

# The backlog per queue and group computed here, independently: every
# partition against the group's cursor (none: the log's start; a group
# subscribed 'new' or from a timestamp counts no partition it has no cursor on).
my $NAIVE = <<'EOF';
WITH g AS (
  SELECT DISTINCT p.queue_id, c.consumer_group AS grp FROM queen.log_consumers c
    JOIN queen.log_partitions p ON p.id = c.partition_id
  UNION SELECT queue_id, consumer_group FROM queen.consumer_groups_metadata
  UNION SELECT p.queue_id, d.consumer_group FROM queen.log_dlq d JOIN queen.log_partitions p ON p.id = d.partition_id),
gq AS (SELECT * FROM g UNION
       SELECT id, '__QUEUE_MODE__' FROM queen.queues q WHERE NOT EXISTS (SELECT 1 FROM g WHERE g.queue_id = q.id)),
x AS (
  SELECT q.tenant_id, q.name, gq.grp, p.id AS pid, p.last_offset,
         CASE WHEN c.partition_id IS NULL AND m.subscription_mode IN ('new', 'timestamp') THEN p.last_offset
              ELSE GREATEST(COALESCE(c.committed, -1), p.log_start - 1) END AS floor,
         c.worker_id IS NOT NULL AND c.lease_expires_at > now() AS leased
    FROM gq JOIN queen.queues q ON q.id = gq.queue_id
    JOIN queen.log_partitions p ON p.queue_id = q.id
    LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = gq.grp
    LEFT JOIN queen.consumer_groups_metadata m ON m.queue_id = q.id AND m.consumer_group = gq.grp)
SELECT x.tenant_id, x.name, x.grp,
       sum(GREATEST(x.last_offset - x.floor, 0)),
       count(*) FILTER (WHERE x.last_offset > x.floor),
       count(*) FILTER (WHERE x.leased),
       (SELECT count(*) FROM queen.log_dlq d JOIN queen.log_partitions p ON p.id = d.partition_id
         JOIN queen.queues q ON q.id = p.queue_id
        WHERE q.tenant_id = x.tenant_id AND q.name = x.name AND d.consumer_group = x.grp),
       COALESCE(extract(epoch FROM now() - min((SELECT s.created_at FROM queen.log_segments s
               WHERE s.partition_id = x.pid AND s.base_offset <= x.floor + 1
               ORDER BY s.base_offset DESC LIMIT 1)) FILTER (WHERE x.last_offset > x.floor)), 0)
  FROM x GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
EOF

# Every (queue, group) row of the naive query against the scrape.
sub check_groups
{
	my ($node, $m, $what, $only) = @_;
	my $rows = 0;
	for my $line (split /\n/, $node->safe_psql('postgres', $NAIVE))
	{
		my ($t, $q, $g, $backlog, $parts, $leased, $dead, $lag) = split /\|/, $line;
		next if defined $only && $t ne $only;
		my $k = gkey($t, $q, $g);
		$rows++;
		is($m->{queen_streams_consumer_group_backlog_messages}{$k}, $backlog, "$what: backlog of $q/$g");
		is($m->{queen_streams_consumer_group_partitions_with_backlog}{$k}, $parts,
			"$what: partitions with backlog of $q/$g");
		is($m->{queen_streams_consumer_group_leased_partitions}{$k}, $leased, "$what: leased partitions of $q/$g");
		is($m->{queen_streams_consumer_group_dead_letters}{$k}, $dead, "$what: dead letters of $q/$g");
		my $got = $m->{queen_streams_consumer_group_lag_seconds}{$k} // -1;
		# the scrape came first: its lag is at most the naive one, and close
		ok($got <= $lag + 0.01 && $got >= $lag - 10 && ($lag == 0) == ($got == 0),
			"$what: lag seconds of $q/$g ($got, SQL $lag)");
	}
	is(scalar(keys %{ $m->{queen_streams_consumer_group_backlog_messages} }), $rows,
		"$what: one series per queue and group ($rows)");
}

# ------------------------------------------------------------ tenancy off
my $node = qs_node('gauges', <<'EOF');
queen_streams.metrics_gauges_interval = 0
queen_streams.stream_workers = 1
queen_streams.stream_poll_interval = 200
EOF
my $D = '00000000-0000-0000-0000-000000000001';
sub sql { return $node->safe_psql('postgres', $_[0]); }

sub push_items
{
	my ($queue, $part, $n, $tag) = @_;
	my @items = map { { queue => $queue, partition => $part, transactionId => "$tag$_", payload => { i => $_ } } } 1 .. $n;
	my ($st) = http_json($node, 'POST', '/api/v1/push', { items => \@items });
	die "push: $st" unless $st == 201;
}

push_items('orders', 'p0', 5, 'a');
push_items('orders', 'p1', 4, 'b');
push_items('idle', 'Default', 3, 'c');
sql("UPDATE queen.queues SET retry_delay = 0 WHERE name = 'orders'");

# queue mode: two acked on p0; on p1 one dead-lettered, one failed (retried)
my ($st, $pop) = http_json($node, 'GET', '/api/v1/pop/queue/orders/partition/p0?batch=2');
is(scalar @{ $pop->{messages} }, 2, 'popped two of p0');
my @acks = map { { transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
	leaseId => $_->{leaseId}, status => 'completed' } } @{ $pop->{messages} };
($st) = http_json($node, 'POST', '/api/v1/ack/batch', { acknowledgments => \@acks });
is($st, 200, 'acked them');
($st, $pop) = http_json($node, 'GET', '/api/v1/pop/queue/orders/partition/p1?batch=2');
my ($m1, $m2) = @{ $pop->{messages} };
($st) = http_json($node, 'POST', '/api/v1/ack/batch', { acknowledgments => [
	{ transactionId => $m1->{transactionId}, partitionId => $m1->{partitionId}, leaseId => $m1->{leaseId}, status => 'dlq' },
	{ transactionId => $m2->{transactionId}, partitionId => $m2->{partitionId}, leaseId => $m2->{leaseId}, status => 'failed' } ] });
is($st, 200, 'a dead letter and a nack on p1');

# group g1 holds a lease on p0; group g2 subscribes to new messages only
($st, $pop) = http_json($node, 'GET', '/api/v1/pop/queue/orders/partition/p0?batch=3&consumerGroup=g1');
is(scalar @{ $pop->{messages} }, 3, 'g1 leased three of p0');
($st, $pop) = http_json($node, 'GET', '/api/v1/pop/queue/orders/partition/p1?batch=3&consumerGroup=g2&subscriptionMode=new');
is($st, 204, 'g2 (new) finds nothing on p1 yet');
push_items('orders', 'p1', 2, 'd');
push_items('orders', 'p2', 1, 'e');
is(sql("SELECT subscription_mode FROM queen.consumer_groups_metadata WHERE consumer_group = 'g2'"), 'new',
	'g2 is subscribed to new messages');

# a declared stream over 'clicks', a one-minute window left open, then paused
is(sql("SELECT queen_streams.create_stream('clicks.per_minute', "
	  . $lit->({ source => 'clicks', sink => 'clicks.per_minute', key => '$.user',
		window => { type => 'tumbling', size => 60 }, time => { type => 'processing' },
		aggregates => { n => { fn => 'count' } } }) . ")->>'success'"), 'true', 'a declared stream');
push_items('clicks', "u$_", 2, "k$_") for 1 .. 3;
ok($node->poll_query_until('postgres',
	"SELECT bool_and(lag = 0) AND sum(open_windows) = 3 FROM queen_streams.stream_status('clicks.per_minute')"),
	'the stream folded every click into open windows');
sql("SELECT queen_streams.pause_stream('clicks.per_minute')");
push_items('clicks', 'u1', 4, 'l');    # lag while paused
sleep 2;    # every backlog at least a second old

my $m = scrape($node);
check_groups($node, $m, 'tenancy off');

# the numbers this workload makes, by hand
is($m->{queen_streams_consumer_group_backlog_messages}{ gkey($D, 'orders', '__QUEUE_MODE__') }, 9,
	'orders in queue mode: 12 pushed, 2 acked, 1 dead-lettered');
is($m->{queen_streams_consumer_group_dead_letters}{ gkey($D, 'orders', '__QUEUE_MODE__') }, 1, 'one dead letter');
is($m->{queen_streams_consumer_group_leased_partitions}{ gkey($D, 'orders', 'g1') }, 1, 'g1 leases p0');
is($m->{queen_streams_consumer_group_backlog_messages}{ gkey($D, 'orders', 'g1') }, 12, 'g1 acked nothing');
is($m->{queen_streams_consumer_group_backlog_messages}{ gkey($D, 'orders', 'g2') }, 2,
	'g2 (new): the two pushed to p1 after its subscription, none of p2 before its first pop there');
is($m->{queen_streams_consumer_group_backlog_messages}{ gkey($D, 'idle', '__QUEUE_MODE__') }, 3,
	'a queue nobody consumes: its whole log under __QUEUE_MODE__');
ok($m->{queen_streams_consumer_group_lag_seconds}{ gkey($D, 'idle', '__QUEUE_MODE__') } >= 2,
	'its lag is the age of its oldest message');
is($m->{queen_streams_queue_partitions}{"queue=orders,tenant=$D"}, 3, 'orders has three partitions');
is($m->{queen_streams_queue_messages}{"queue=orders,tenant=$D"}, 12, 'and stores twelve messages');
is($m->{queen_streams_standby}{''}, 0, 'the primary says it is not a standby');

# the view says the same
is(sql("SELECT string_agg(concat_ws(',', queue, consumer_group, backlog_messages, partitions_with_backlog,"
	  . " leased_partitions, dead_letters), ' ' ORDER BY queue, consumer_group) FROM queen_streams.queue_stats"),
	join(' ', map {
		my ($q, $g) = @$_; my $k = gkey($D, $q, $g);
		join(',', $q, $g, map { $m->{$_}{$k} } qw(queen_streams_consumer_group_backlog_messages
		  queen_streams_consumer_group_partitions_with_backlog queen_streams_consumer_group_leased_partitions
		  queen_streams_consumer_group_dead_letters))
	} sort { "$a->[0] $a->[1]" cmp "$b->[0] $b->[1]" }
	  map { /consumer_group=(.*),queue=(.*),tenant=/ ? [ $2, $1 ] : () }
	  keys %{ $m->{queen_streams_consumer_group_backlog_messages} }),
	'queen_streams.queue_stats has the same rows');

# the stream's gauges against its per-partition status
my ($lag, $open, $late, $errors, $events) = split /\|/,
  sql("SELECT sum(lag), sum(open_windows), sum(late), sum(errors), sum(events)"
	  . " FROM queen_streams.stream_status('clicks.per_minute')");
my $sk = "stream=clicks.per_minute,tenant=$D";
is($m->{queen_streams_declared_stream_lag_messages}{$sk}, $lag, "stream lag ($lag)");
is($lag, 4, 'the four pushed while paused');
is($m->{queen_streams_declared_stream_open_windows}{$sk}, $open, "open windows ($open)");
is($m->{queen_streams_declared_stream_late_events_total}{$sk}, $late, 'late events');
is($m->{queen_streams_declared_stream_errors_total}{$sk}, $errors, 'errors');
is($m->{queen_streams_declared_stream_events_total}{$sk}, $events, "events ($events)");
is($m->{queen_streams_declared_stream_paused}{$sk}, 1, 'paused');

# acking everything empties the backlogs, not the dead letters
sql("SELECT queen.pop('orders', consumer_group => NULL, batch => 100, partitions => 10, auto_ack => true)");
sql("UPDATE queen.log_consumers SET worker_id = NULL, lease_expires_at = NULL WHERE consumer_group = 'g1'");
sql("SELECT queen.pop('orders', consumer_group => 'g1', batch => 100, partitions => 10, auto_ack => true)");
$m = scrape($node);
check_groups($node, $m, 'after draining');
is($m->{queen_streams_consumer_group_backlog_messages}{ gkey($D, 'orders', '__QUEUE_MODE__') }, 0,
	'queue mode drained');
is($m->{queen_streams_consumer_group_lag_seconds}{ gkey($D, 'orders', '__QUEUE_MODE__') }, '0.000',
	'no lag without a backlog');
is($m->{queen_streams_consumer_group_dead_letters}{ gkey($D, 'orders', '__QUEUE_MODE__') }, 1,
	'the dead letter stays');

# parked consumers per queue: a long-poll pop waits on an empty queue
push_items('waitq', 'Default', 1, 'w');
sql("SELECT queen.pop('waitq', auto_ack => true)");
my $sock = park_pop($node, '/api/v1/pop/queue/waitq?wait=true&timeout=30000');
is(wait_parked($node, 1), 1, 'a pop is parked');
$m = scrape($node);
is($m->{queen_streams_queue_parked_consumers}{"queue=waitq,tenant=$D"}, 1, 'waitq has one parked consumer');
is($m->{queen_streams_queue_parked_consumers}{"queue=orders,tenant=$D"}, 0, 'orders none');
push_items('waitq', 'Default', 1, 'x');
my ($pst) = read_response($sock, 10);
is($pst, 200, 'the push answered it');
is(wait_parked($node, 0), 0, 'nothing parked');
$m = scrape($node);
is($m->{queen_streams_queue_parked_consumers}{"queue=waitq,tenant=$D"}, 0, 'waitq back to zero');

# every status under its own code (a 405 and a 414 were "other" alike)
($st) = http($node, 'DELETE', '/metrics');
is($st, 405, 'DELETE /metrics: 405');
$m = scrape($node);
ok((grep { /code=405/ } keys %{ $m->{queen_streams_http_requests_total} }), '405 counted under code="405"');
ok(!(grep { /code=other/ } keys %{ $m->{queen_streams_http_requests_total} }), 'no code="other"');
$node->stop;

# ------------------------------------------------------------ tenancy on, a bound of 15 series
my $A = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
my $B = 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb';
$node = qs_node('gauges_tenancy', <<'EOF');
queen_streams.tenancy = header
queen_streams.metrics_queues = 16
queen_streams.metrics_gauges_interval = 0
EOF
# queue qN holds N messages
for my $t ($A, $B)
{
	my @items = map { my $q = $_; map { { queue => "q$q", partition => 'p', payload => $_ } } 1 .. $q } 1 .. 17;
	($st) = http_json($node, 'POST', '/api/v1/push', { items => \@items }, { 'x-queen-tenant' => $t });
	die "push: $st" unless $st == 201;
}
# tenant A: q1 acked in queue mode, q2 consumed by a group
$node->safe_psql('postgres', "SELECT queen.pop('q1', tenant => '$A', auto_ack => true)");
$node->safe_psql('postgres', "SELECT queen.pop('q2', consumer_group => 'g', batch => 1, tenant => '$A')");
$m = scrape($node, { 'x-queen-tenant' => $A });
my $series = $m->{queen_streams_consumer_group_backlog_messages};
ok(!(grep { /tenant=\Q$B\E/ } keys %$series), "tenant A's scrape shows none of B's rows");
is(scalar(keys %$series), 16, 'fifteen rows of its own (metrics_queues - 1) and the overflow row');
my @kept = grep { !/\(other\)/ } keys %$series;
is(join(' ', sort { $a <=> $b } map { /queue=q(\d+)/; $1 } @kept), join(' ', 3 .. 17), 'the largest backlogs kept');
is($series->{"consumer_group=(other),queue=(other),tenant=$A"}, 2,
	'the rest summed into (other): q1 drained (0), q2 for g (2)');
is($m->{queen_streams_consumer_group_lag_seconds}{"consumer_group=(other),queue=(other),tenant=$A"} > 0, 1,
	'the overflow lag is the largest of the rest');
# 17 queues past a bound of 15: the two with the smallest backlogs folded at the queue level too
is($m->{queen_streams_queue_messages}{"queue=q17,tenant=$A"}, 17, 'q17 has its queue series');
is($m->{queen_streams_queue_messages}{"queue=(other),tenant=$A"}, 3, 'q1 and q2 summed into the queue overflow');
is($m->{queen_streams_queue_partitions}{"queue=(other),tenant=$A"}, 2, '... with their two partitions');
is($m->{queen_streams_gauges_folded_rows}{'family=consumer_group'}, 2, 'two group rows folded');
is($m->{queen_streams_gauges_folded_rows}{'family=queue'}, 2, 'two queues folded');
is($m->{queen_streams_gauges_folded_rows}{'family=declared_stream'}, 0, 'no stream folded');
my $age = $m->{queen_streams_gauges_age_seconds}{''};
ok(defined $age && $age < 5, 'read at the scrape: an age of about 0 (' . ($age // 'none') . ')');
my %naive;
for (split /\n/, $node->safe_psql('postgres', $NAIVE))
{
	my ($t, $q, $g, $backlog) = split /\|/;
	$naive{ gkey($t, $q, $g) } = $backlog;
}
is($series->{$_}, $naive{$_}, "tenancy: $_ equals SQL") for @kept;
$m = scrape($node, { 'x-queen-tenant' => $B });
is($m->{queen_streams_consumer_group_backlog_messages}{ gkey($B, 'q17', '__QUEUE_MODE__') }, 17,
	"tenant B's own q17");
ok(!(grep { /tenant=\Q$A\E/ } keys %{ $m->{queen_streams_consumer_group_backlog_messages} }),
	"B's scrape shows none of A's rows");

# tenant C: five queues with three groups each (15 rows with backlogs of 10)
# and a queue "wide" with two groups on one message each. Its group rows
# are all folded, but it keeps its partitions and messages series: there
# are 6 queues, under the bound.
my $C = 'cccccccc-cccc-4ccc-8ccc-cccccccccccc';
for my $q (map { "d$_" } 1 .. 5)
{
	$node->safe_psql('postgres', "SELECT queen.push(" . $lit->({ items => [ map { { queue => $q, payload => $_ } } 1 .. 10 ] })
		  . ", tenant => '$C')");
	$node->safe_psql('postgres', "SELECT queen.pop('$q', consumer_group => 'g$_', batch => 1, tenant => '$C')") for 1 .. 3;
}
$node->safe_psql('postgres', "SELECT queen.push(" . $lit->({ items => [ { queue => 'wide', payload => 1 } ] }) . ", tenant => '$C')");
$node->safe_psql('postgres', "SELECT queen.pop('wide', consumer_group => 'w$_', batch => 1, tenant => '$C')") for 1 .. 2;
$m = scrape($node, { 'x-queen-tenant' => $C });
$series = $m->{queen_streams_consumer_group_backlog_messages};
is(scalar(grep { /queue=wide,/ } keys %$series), 0, "wide's group rows are all folded");
is($series->{"consumer_group=(other),queue=(other),tenant=$C"}, 2, '... into (other): one message for each of two groups');
is($m->{queen_streams_queue_messages}{"queue=wide,tenant=$C"}, 1, 'wide keeps its messages series');
is($m->{queen_streams_queue_partitions}{"queue=wide,tenant=$C"}, 1, '... and its partitions series');
is($m->{queen_streams_queue_messages}{"queue=d5,tenant=$C"}, 10, 'd5 too');
ok(!exists $m->{queen_streams_queue_messages}{"queue=(other),tenant=$C"}, 'no queue folded: no queue overflow series');
is($m->{queen_streams_gauges_folded_rows}{'family=consumer_group'}, 2, 'the folded gauge says two group rows');
is($m->{queen_streams_gauges_folded_rows}{'family=queue'}, 0, '... and no queue');

# gauges that cannot be read (a table renamed under them): the scrape still
# answers 200 with the counters and queen_streams_gauges_up 0, and logs why
$node->safe_psql('postgres', 'ALTER TABLE queen.log_dlq RENAME TO log_dlq_away');
$m = scrape($node);
is($m->{queen_streams_gauges_up}{''}, 0, 'gauges that fail: gauges_up 0, the scrape still 200');
my ($mst, $mtext) = http($node, 'GET', '/metrics');
like($mtext, qr/^# TYPE queen_streams_queue_pushed_messages_total counter$/m, '... with the counters');
ok(!exists $m->{queen_streams_consumer_group_backlog_messages}, '... and no gauge half-written');
$node->safe_psql('postgres', 'ALTER TABLE queen.log_dlq_away RENAME TO log_dlq');
$m = scrape($node);
is($m->{queen_streams_gauges_up}{''}, 1, 'readable again: gauges_up 1');

# a library newer than the installed schema (before ALTER EXTENSION UPDATE) still serves the gauges
$node->safe_psql('postgres', "DROP EXTENSION queen_streams CASCADE; CREATE EXTENSION queen_streams VERSION '0.7.0'");
$node->safe_psql('postgres', q{SELECT queen.push('{"items":[{"queue":"old","payload":1}]}')});
$m = scrape($node);
is($m->{queen_streams_consumer_group_backlog_messages}{ gkey('00000000-0000-0000-0000-000000000001', 'old', '__QUEUE_MODE__') },
	1, 'the gauges under the 0.7.0 schema');

done_testing();
