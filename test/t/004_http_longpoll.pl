# Long-poll pops (wait=true): parked without a transaction or a backend,
# woken within milliseconds by a commit that pushes to their queue, whether
# the push came over HTTP, plain SQL or a cycle's sink, and answered 204 at
# their timeout.
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

my $node = qs_node('longpoll');

# ---- the timeout passes: 204, not before
my $s = park_pop($node, '/api/v1/pop/queue/quiet?wait=true&timeout=700');
my ($st, $body, $waited) = read_response($s, 10);
is($st, 204, 'a long poll that finds nothing answers 204');
ok($waited >= 0.6 && $waited < 2.5, sprintf('at its timeout (%.3f s)', $waited));
close $s;

# ---- woken by an HTTP push
$s = park_pop($node, '/api/v1/pop/queue/lp?autoAck=true&wait=true&timeout=20000');
is(wait_parked($node, 1), 1, 'the pop is parked');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queen_streams http'"
	  . " AND xact_start IS NOT NULL"), '0', 'holding no transaction');
my $t0 = time;
my ($pst) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'lp', payload => { via => 'http' } } ] });
is($pst, 201, 'pushed over HTTP');
($st, $body, $waited) = read_response($s, 10);
my $lat_http = time - $t0;
is($st, 200, 'the parked pop answers 200');
is(decode_json($body)->{messages}[0]{data}{via}, 'http', 'with the pushed message');
ok($lat_http < 0.5, sprintf('within milliseconds of the push (%.1f ms)', 1000 * $lat_http));
close $s;

# ---- woken by a plain SQL push from another backend
my $psql = $node->background_psql('postgres');
$s = park_pop($node, '/api/v1/pop/queue/lp?autoAck=true&wait=true&timeout=20000');
is(wait_parked($node, 1), 1, 'parked again');
$t0 = time;
$psql->query_safe(q{SELECT queen.push('{"items":[{"queue":"lp","payload":{"via":"sql"}}]}')});
($st, $body) = read_response($s, 10);
my $lat_sql = time - $t0;
is($st, 200, 'an SQL push wakes the parked pop');
is(decode_json($body)->{messages}[0]{data}{via}, 'sql', 'with the pushed message');
ok($lat_sql < 0.5, sprintf('within milliseconds of the commit (%.1f ms)', 1000 * $lat_sql));
close $s;

# ---- a push rolled back wakes nobody; one in an explicit transaction wakes at COMMIT
$s = park_pop($node, '/api/v1/pop/queue/lp?autoAck=true&wait=true&timeout=20000');
is(wait_parked($node, 1), 1, 'parked again');
$psql->query_safe(q{BEGIN; SELECT queen.push('{"items":[{"queue":"lp","payload":{"via":"rollback"}}]}'); ROLLBACK;});
$psql->query_safe(q{BEGIN; SELECT queen.push('{"items":[{"queue":"lp","payload":{"via":"commit"}}]}');});
usleep(300_000);
is(parked_pops($node), 1, 'still parked before COMMIT');
$psql->query_safe('COMMIT');
($st, $body) = read_response($s, 10);
is($st, 200, 'woken by COMMIT');
is(decode_json($body)->{messages}[0]{data}{via}, 'commit', 'and never saw the rolled back push');
close $s;

# ---- other queues do not answer; the right one does
my $other = park_pop($node, '/api/v1/pop/queue/elsewhere?autoAck=true&wait=true&timeout=20000');
$s = park_pop($node, '/api/v1/pop/queue/lp?autoAck=true&wait=true&timeout=20000');
is(wait_parked($node, 2), 2, 'two pops parked');
http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'lp', payload => { n => 1 } } ] });
($st) = read_response($s, 10);
is($st, 200, 'the pop of the pushed queue answers');
is(wait_parked($node, 1), 1, 'the other stays parked');
close $s;

# ---- woken by a cycle's sink push
my (undef, $reg) = http_json($node, 'POST', '/streams/v1/queries',
	{ name => 'lpq', source_queue => 'src', sink_queue => 'elsewhere', config_hash => 'h' });
http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'src', payload => { k => 1 } } ] });
my (undef, $batch) = http_json($node, 'GET', '/api/v1/pop/queue/src?consumerGroup=streams.lpq');
my $m = $batch->{messages}[0];
$t0 = time;
my (undef, $cyc) = http_json($node, 'POST', '/streams/v1/cycle',
	{ query_id => $reg->{query_id}, partition_id => $m->{partitionId},
	  consumer_group => 'streams.lpq',
	  push_items => [ { queue => 'elsewhere', payload => { from => 'cycle' } } ],
	  ack => { transactionId => $m->{transactionId}, leaseId => $m->{leaseId}, count => 1 } });
ok($cyc->{success}, 'the cycle committed');
($st, $body) = read_response($other, 10);
my $lat_cycle = time - $t0;
is($st, 200, 'a cycle\'s sink push wakes the pop parked on the sink');
is(decode_json($body)->{messages}[0]{data}{from}, 'cycle', 'with the sink message');
close $other;

# ---- many parked pops, one push: one gets it, the rest keep waiting
my @many = map { park_pop($node, '/api/v1/pop/queue/crowd?autoAck=true&wait=true&timeout=1500') } 1 .. 20;
is(wait_parked($node, 20), 20, 'twenty pops parked');
http_json($node, 'POST', '/api/v1/push', { items => [ { queue => 'crowd', payload => {} } ] });
my %by;
for my $c (@many)
{
	my ($cst) = read_response($c, 10);
	$by{ $cst // 'none' }++;
	close $c;
}
is($by{200}, 1, 'exactly one of twenty parked pops got the message');
is($by{204}, 19, 'the others answered 204 at their timeout');
is(parked_pops($node), 0, 'nothing left parked');

diag(sprintf('wake latency: HTTP push %.1f ms, SQL push %.1f ms, cycle %.1f ms',
	1000 * $lat_http, 1000 * $lat_sql, 1000 * $lat_cycle));
$psql->quit;
$node->stop;
done_testing();
