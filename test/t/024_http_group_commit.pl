# Group commit across HTTP requests (src/http/group.c): writing requests
# that arrive together on a worker run in one transaction, one
# subtransaction each, and are answered after one synchronous commit.
#
# - groups of more than one request really form (the /metrics counters);
# - in a group, a request that fails (a push that queen.push refuses, an
#   ack of an unknown partition, a transaction whose ack is rejected, bad
#   JSON) gets its own answer and only it fails: the others are stored;
# - nothing of a group is visible, and nothing of it is answered, before
#   its commit completes: with a synchronous standby that never comes, the
#   commit waits, the group's pushes stay invisible to another session and
#   unanswered; once synchronous_standby_names is cleared they are answered
#   and visible together;
# - a long-poll pop in a group parks without holding it, and the push of
#   the same group wakes it.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use IO::Socket::INET;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# A worker waits up to 300 ms for more requests, so that requests sent
# together form one group even on a loaded machine.
# (Synchronous replication needs WAL senders, which the test cluster has
# none of by default.)
my $node = qs_node('group_commit', <<'EOF');
wal_level = replica
max_wal_senders = 2
queen_streams.group_commit_max_requests = 64
queen_streams.group_commit_max_wait = 300
EOF
my $json = JSON::PP->new->canonical;

sub request_bytes
{
	my ($method, $path, $body, $headers) = @_;
	my $h = join('', map { "$_: $headers->{$_}\r\n" } sort keys %{ $headers // {} });
	$body = $json->encode($body) if ref $body;
	return "$method $path HTTP/1.1\r\nHost: x\r\n$h\r\n" unless defined $body;
	return "$method $path HTTP/1.1\r\nHost: x\r\n${h}Content-Type: application/json\r\n"
	  . "Content-Length: " . length($body) . "\r\n\r\n$body";
}

# Open one connection per request, then send them all at once.
sub send_all
{
	my @socks;
	for my $r (@_)
	{
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
			PeerPort => $node->{qs_http_port}, Proto => 'tcp') or die "connect: $!";
		$s->autoflush(1);
		push @socks, [ $s, request_bytes(@$r), '' ];
	}
	# the connections are accepted (and balanced) before any request is sent
	usleep(200_000);
	syswrite($_->[0], $_->[1]) for @socks;
	return \@socks;
}

# Read the answers that complete within `timeout` seconds: a list of
# [status, decoded body] (status undef: no complete answer).
sub collect
{
	my ($socks, $timeout) = @_;
	my $deadline = time + $timeout;
	my @out = map { undef } @$socks;
	$_->[0]->blocking(0) for @$socks;
	while (time < $deadline && grep { !defined } @out)
	{
		for my $i (0 .. $#$socks)
		{
			next if defined $out[$i];
			my $n = sysread($socks->[$i][0], my $buf, 65536);
			$socks->[$i][2] .= $buf if $n;
			if ($socks->[$i][2] =~ /^HTTP\/1\.1 (\d+).*?\r\n\r\n(.*)$/s)
			{
				my ($status, $body) = ($1, $2);
				my ($len) = $socks->[$i][2] =~ /Content-Length: (\d+)/i;
				$out[$i] = [ $status, length($body) ? eval { $json->decode($body) } : undef ]
				  if length($body) >= ($len // 0);
			}
		}
		usleep(5_000);
	}
	return map { $_ // [ undef, undef ] } @out;
}

sub metric
{
	my ($name) = @_;
	my (undef, $text) = http($node, 'GET', '/metrics');
	my ($v) = $text =~ /^\Q$name\E (\d+)$/m;
	return $v // 0;
}

sub stored
{
	my ($queue) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0) FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id"
		  . " JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = '$queue'");
}

sub push_req
{
	my ($queue, $txn) = @_;
	return [ 'POST', '/api/v1/push',
		{ items => [ { queue => $queue, payload => { t => $txn }, transactionId => $txn } ] } ];
}

# ---- groups of more than one request form
my ($c0, $r0) = (metric('queen_streams_http_group_commits_total'),
	metric('queen_streams_http_group_requests_total'));
my @answers = collect(send_all(map { push_req('g', "g$_") } 1 .. 16), 30);
is(scalar(grep { ($_->[0] // 0) == 201 } @answers), 16, '16 pushes sent together: all 201');
my ($c1, $r1) = (metric('queen_streams_http_group_commits_total'),
	metric('queen_streams_http_group_requests_total'));
is($r1 - $r0, 16, 'the 16 pushes were committed by group commits');
cmp_ok($c1 - $c0, '<', 16, 'in fewer commits than requests: groups of more than one formed');
is(stored('g'), 16, 'all 16 stored');

# ---- a group's pushes are pushed as one (queen.push_text_many)
# 12 fresh ids and 4 requests repeating one of them: each repeat answers
# duplicate with its original's message id, whichever group either ran in
my $m0 = metric('queen_streams_http_group_merged_total');
my @mreqs = ((map { push_req('mg', "m$_") } 1 .. 12), (map { push_req('mg', "m$_") } 1 .. 4));
@answers = collect(send_all(@mreqs), 30);
is(scalar(grep { ($_->[0] // 0) == 201 } @answers), 16, '16 pushes, 4 repeating an id: all 201');
cmp_ok(metric('queen_streams_http_group_merged_total') - $m0, '>=', 2,
	'pushes of one group were served as one push');
my %first;
for my $i (0 .. 15)
{
	my $r = $answers[$i][1][0] // {};
	my $txn = $r->{transaction_id} // "?$i";
	if (!exists $first{$txn}) { $first{$txn} = $r; next; }
	my @pair = sort { ($a->{status} // '') cmp ($b->{status} // '') } ($first{$txn}, $r);
	is(join('/', map { $_->{status} // 'none' } @pair), 'duplicate/queued', "$txn: one queued, one duplicate");
	is($pair[0]{message_id}, $pair[1]{message_id}, "... the duplicate answers the original's message id");
}
is(stored('mg'), 12, 'the 12 distinct ids stored once each');
my $segs = $node->safe_psql('postgres',
	"SELECT count(*) FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id"
	  . " JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'mg'");
cmp_ok($segs, '<', 12, "in fewer segments than pushes ($segs)");
my ($pst, $pdoc) = http_json($node, 'GET', '/api/v1/pop/queue/mg?batch=20&autoAck=true');
is(join(',', sort map { $_->{transactionId} } @{ $pdoc->{messages} // [] }),
	join(',', sort map { "m$_" } 1 .. 12), 'a pop serves each of them once');

# ---- a group's cycles run in one call (queen_streams.cycle_many): each
# answered as alone, their sink items pushed as one push; a failing cycle
# (a lease that is not its) fails alone
$node->safe_psql('postgres', q{
	SELECT queen_streams.register_query('{"name":"gc.q","source_queue":"gcs","sink_queue":"gck","config_hash":"h"}');
	SELECT queen.push(jsonb_build_object('items', (SELECT jsonb_agg(jsonb_build_object(
	  'queue', 'gcs', 'partition', 'p' || i, 'payload', i)) FROM generate_series(1, 6) i)));
});
my @leases;
for (1 .. 6)
{
	my (undef, $p) = http_json($node, 'GET', '/api/v1/pop/queue/gcs?batch=10');
	push @leases, [ $p->{messages}[0]{partitionId}, $p->{messages}[0]{leaseId} ];
}
my $qid = $node->safe_psql('postgres', "SELECT id FROM queen_streams.queries WHERE name = 'gc.q'");
my @creqs = map {
	my ($pid, $lease) = @{ $leases[$_] };
	[ 'POST', '/streams/v1/cycle', { query_id => $qid, partition_id => $pid,
		state_ops => [ { type => 'upsert', key => 'k', value => { n => $_ } } ],
		push_items => [ { queue => 'gck', partition => 'out', payload => { n => $_ } } ],
		ack => { leaseId => ($_ == 3 ? 'not-the-lease' : $lease), count => 1 } } ]
} 0 .. 5;
$m0 = metric('queen_streams_http_group_merged_total');
@answers = collect(send_all(@creqs), 30);
is(join(',', map { $_->[0] // 'none' } @answers), '200,200,200,200,200,200', '6 cycles sent together: all answered');
is(join(',', map { $_->[1]{success} ? 'ok' : ($_->[1]{error} // '?') } @answers),
	'ok,ok,ok,invalid or expired lease,ok,ok', 'the cycle with a foreign lease failed alone');
cmp_ok(metric('queen_streams_http_group_merged_total') - $m0, '>=', 2, 'cycles of one group ran in one call');
is(join(',', sort { $a <=> $b } map { $_->[1]{push_results}[0]{baseOffset} // () } @answers), '0,1,2,3,4',
	'each stored sink item answers its own offset');
is($node->safe_psql('postgres', q{
	SELECT string_agg(f.payload, ',' ORDER BY f.payload)
	  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
	  JOIN queen.queues q ON q.id = p.queue_id,
	  LATERAL queen.segment_frames(s.blob, s.end_offset - s.base_offset + 1) f WHERE q.name = 'gck'}),
	'{"n": 0},{"n": 1},{"n": 2},{"n": 4},{"n": 5}', 'the sink holds each succeeded cycle\'s item once');
is($node->safe_psql('postgres', q{SELECT string_agg(value->>'n', ',' ORDER BY value->>'n') FROM queen_streams.state}),
	'0,1,2,4,5', 'and their state, not the failed one\'s');

# ---- one failing request in a group fails alone
my ($st, $doc) = http_json($node, 'POST', '/api/v1/push', { items => [
	map { { queue => 'src', payload => { n => $_ }, transactionId => "s$_" } } 1 .. 2 ] });
is($st, 201, 'source pushed');
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/src?batch=10');
is($st, 200, 'source popped');
my @msgs = @{ $doc->{messages} };
is(scalar(@msgs), 2, 'two leased messages');

my $d0 = metric('queen_streams_http_group_deferrals_total');
($c0, $r0) = (metric('queen_streams_http_group_commits_total'),
	metric('queen_streams_http_group_requests_total'));
my @reqs = (
	push_req('f', 'f1'),
	[ 'POST', '/api/v1/push', { items => [ { payload => { no => 'queue' } } ] } ],
	push_req('f', 'f2'),
	[ 'POST', '/api/v1/ack', { transactionId => 'x', partitionId => '00000000-0000-0000-0000-000000000001',
		leaseId => $msgs[0]{leaseId}, status => 'completed' } ],
	[ 'POST', '/api/v1/ack', { transactionId => $msgs[0]{transactionId}, partitionId => $msgs[0]{partitionId},
		leaseId => $msgs[0]{leaseId}, status => 'completed' } ],
	[ 'POST', '/api/v1/transaction', { operations => [
		{ type => 'push', items => [ { queue => 'f', payload => { t => 'ft' }, transactionId => 'ft' } ] },
		{ type => 'ack', transactionId => 'nosuch', partitionId => $msgs[1]{partitionId},
		  leaseId => '00000000-0000-0000-0000-000000000002', status => 'completed' } ] } ],
	[ 'POST', '/api/v1/push', '{"items": [' ],
	push_req('f', 'f3'));
@answers = collect(send_all(@reqs), 30);
($c1, $r1) = (metric('queen_streams_http_group_commits_total'),
	metric('queen_streams_http_group_requests_total'));
is($answers[0][0], 201, 'push f1: 201');
is($answers[1][0], 400, 'push without a queue: 400, alone');
like($answers[1][1]{error} // '', qr/queue/, '... naming the queue');
is($answers[2][0], 201, 'push f2: 201');
ok(($answers[3][0] // 0) == 404 || (($answers[3][0] // 0) == 200 && !$answers[3][1][0]{success}),
	'ack of an unknown partition fails (' . ($answers[3][0] // 'none') . ')');
is($answers[4][0], 200, 'the good ack: 200');
ok($answers[4][1][0]{success}, '... and it succeeded');
is($answers[5][0], 200, 'the failing transaction: 200 (it ran)');
ok(!$answers[5][1]{success}, '... with success false');
is($answers[6][0], 400, 'bad JSON: 400');
is($answers[7][0], 201, 'push f3: 201');
# all 8: push reads its text (push_text) inside its own subtransaction, so
# the truncated body fails there too, beside the others
is($r1 - $r0, 8, 'the 8 requests ran in group commits');
# one group per worker, plus one for each request that gave way on a lock
# (the pushes to f meet on its partition row) and ran in a later group
my $deferred = metric('queen_streams_http_group_deferrals_total') - $d0;
cmp_ok($c1 - $c0 - $deferred, '<=', 3,
	"in at most 3 commits besides the $deferred deferred (2 workers, 300 ms to gather)");
is(stored('f'), 3, 'f1, f2 and f3 stored; the failed transaction pushed nothing');
my $left = $node->safe_psql('postgres',
	"SELECT count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
	  . " JOIN queen.log_consumers c ON c.partition_id = p.id WHERE q.name = 'src' AND c.committed >= 0");
is($left, 1, 'the good ack committed beside the failures');

# ---- nothing of a group is visible or answered before its commit completes
$node->append_conf('postgresql.conf', "synchronous_standby_names = 'nosuch'\n");
$node->reload;
usleep(300_000);
my $socks = send_all(map { push_req('v', "v$_") } 1 .. 6);
my @early = collect($socks, 3);
is(scalar(grep { defined $_->[0] } @early), 0,
	'commit waiting for a synchronous standby: no push of the group is answered');
is(stored('v'), 0, '... and another session sees none of them');
my $waiting = $node->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queen_streams http' AND wait_event = 'SyncRep'");
cmp_ok($waiting, '>=', 1, '... the workers wait in the commit');
$node->append_conf('postgresql.conf', "synchronous_standby_names = ''\n");
$node->reload;
my @late = collect($socks, 30);
is(scalar(grep { ($_->[0] // 0) == 201 } @late), 6, 'standby requirement lifted: all 6 answered 201');
is(stored('v'), 6, '... and all 6 visible');

# ---- a parked pop does not hold its group; the group's push wakes it
my $t0 = time;
$socks = send_all([ 'GET', '/api/v1/pop/queue/w?wait=true&timeout=10000' ], push_req('w', 'w1'));
my ($pop, $pa) = collect($socks, 15);
is($pa->[0], 201, 'push sent with a long-poll pop: 201');
is($pop->[0], 200, 'the pop got the message');
cmp_ok(time - $t0, '<', 8, '... well before its timeout');

# ---- pushes of two tenants in one group: each tenant's only into its own
$node->append_conf('postgresql.conf', "queen_streams.tenancy = header\n");
$node->reload;
usleep(500_000);
my %tenant = (a => 'aaaaaaaa-0000-4000-8000-00000000000a', b => 'bbbbbbbb-0000-4000-8000-00000000000b');
@answers = collect(send_all(map {
	my $t = $_ % 2 ? 'a' : 'b';
	[ @{ push_req('tq', "t$_") }, { 'x-queen-tenant' => $tenant{$t} } ] } 1 .. 12), 30);
is(scalar(grep { ($_->[0] // 0) == 201 } @answers), 12, 'pushes of two tenants sent together: all 201');
is($node->safe_psql('postgres',
	"SELECT string_agg(q.tenant_id || '=' || (SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0)"
	  . " FROM queen.log_partitions p JOIN queen.log_segments s ON s.partition_id = p.id WHERE p.queue_id = q.id),"
	  . " ',' ORDER BY q.tenant_id) FROM queen.queues q WHERE q.name = 'tq'"),
	"$tenant{a}=6,$tenant{b}=6", "... each tenant's queue holds its own 6");
my ($ast, $adoc) = http_json($node, 'GET', '/api/v1/pop/queue/tq?batch=20&autoAck=true',
	undef, { 'x-queen-tenant' => $tenant{a} });
is(join(',', sort map { $_->{transactionId} } @{ $adoc->{messages} // [] }),
	join(',', sort map { "t$_" } grep { $_ % 2 } 1 .. 12), "... and tenant a pops exactly its own");

$node->stop;
done_testing();
