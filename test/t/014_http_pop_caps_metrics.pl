# Bounds of issue 37 (part 7a): the pop caps over HTTP (400 naming the
# setting), and the per-queue counters' slots, freed when a queue is
# deleted and taken over when idle, so that one tenant's many queues do not
# keep new queues out of /metrics. A table of 16 slots (15 and the overflow
# row) makes "full" exact: every slot is within a queue's probe.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = qs_node('caps', <<'EOF');
queen_streams.metrics_queues = 16
queen_streams.metrics_queue_idle = 0
EOF

# ---- pop caps
$node->safe_psql('postgres', q{SELECT queen.push('{"items":[{"queue":"capq","payload":1}]}')});
my ($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/capq?batch=10001');
is($st, 400, 'a batch over queen_streams.max_pop_batch answers 400');
like($doc->{error}, qr/batch must be at most 10000 \(queen_streams\.max_pop_batch\)/, 'naming the limit and the setting');
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/capq?partitions=1001');
is($st, 400, 'partitions over queen_streams.max_pop_partitions answers 400');
like($doc->{error}, qr/partitions must be at most 1000 \(queen_streams\.max_pop_partitions\)/, 'naming its setting');
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/capq?batch=2147483647&wait=true&timeout=100');
is($st, 400, 'INT_MAX is refused before anything is read, even when waiting');
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/capq?batch=10000&partitions=1000');
is($st, 200, 'the defaults themselves are served');
is(scalar @{ $doc->{messages} }, 1, 'with the message');

# ---- counters' slots
sub series
{
	my (undef, $text) = http($node, 'GET', '/metrics');
	my %n;
	$n{$1} = $2 while $text =~ /^queen_streams_queue_pushed_messages_total\{tenant="[^"]*",queue="([^"]*)"\} (\d+)$/mg;
	return \%n;
}

sub push_to
{
	my ($q) = @_;
	$node->safe_psql('postgres', qq{SELECT queen.push('{"items":[{"queue":"$q","payload":1}]}')});
}

# capq holds a slot; 14 more fill the table
push_to("fill$_") for 1 .. 14;
push_to('late');
my $m = series();
is(scalar(grep { $_ ne '(other)' } keys %$m), 15, 'the table holds 15 queues');
ok(!exists $m->{late}, 'a queue past a full table has no series of its own');
is($m->{'(other)'}, 1, 'it is counted in the overflow row');

# a deleted queue (over HTTP: the listener's own backend) frees its slot at commit
($st) = http_json($node, 'DELETE', '/api/v1/resources/queues/fill3');
is($st, 200, 'fill3 deleted');
$m = series();
ok(!exists $m->{fill3}, "the deleted queue's series is gone");
push_to('late');
$m = series();
is($m->{late}, 1, 'the next new queue takes the freed slot');

# a rolled-back delete frees nothing
$node->safe_psql('postgres', q{BEGIN; SELECT queen.delete_queue('fill4'); ROLLBACK;});
push_to('later');
$m = series();
is($m->{fill4}, 1, 'a rolled-back delete keeps the series');
ok(!exists $m->{later}, 'and its slot');

# an idle queue's slot is taken over once metrics_queue_idle has passed
$node->safe_psql('postgres', q{ALTER SYSTEM SET queen_streams.metrics_queue_idle = 1; SELECT pg_reload_conf();});
sleep 3;
push_to('later');
$m = series();
is($m->{later}, 1, 'a new queue takes the slot of a queue idle past metrics_queue_idle');
is(scalar(grep { $_ ne '(other)' } keys %$m), 15, 'the table still holds 15 queues (one idle series gave way)');

done_testing();
