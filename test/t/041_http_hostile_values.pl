# Every string from a URL obeys the one rule (issue 13, point 3): valid
# UTF-8, no NUL byte (libmicrohttpd would decode %00 into the C string and
# cut it short), names within push's 255 bytes; else 400 naming the field,
# and nothing reaches the tables. And a corrupt segment fences its partition
# only (point 2): wildcard pops over HTTP still serve, /metrics counts it.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsHttp;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = qs_node('hostile');

my ($st, $doc) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ map { { queue => 'sq', transactionId => "t$_", payload => { i => $_ } } } 1 .. 3 ] });
is($st, 201, 'push');

my @bad = (
	[ '/api/v1/pop/queue/sq?consumerGroup=%ff%fe', 'consumerGroup', 'invalid UTF-8 group' ],
	[ '/api/v1/pop/queue/sq?consumerGroup=g%00x', 'consumerGroup', 'NUL in a group' ],
	[ '/api/v1/pop/queue/sq?consumerGroup=' . ('g' x 256), 'consumerGroup', 'group over 255 bytes' ],
	[ '/api/v1/pop/queue/s%00q', 'queue', 'NUL in a queue name' ],
	[ '/api/v1/pop/queue/s%ffq', 'queue', 'invalid UTF-8 queue name' ],
	[ '/api/v1/pop/queue/' . ('q' x 256), 'queue', 'queue name over 255 bytes' ],
	[ '/api/v1/pop/queue/sq/partition/De%00fault', 'partition', 'NUL in a partition name' ],
	[ '/api/v1/pop/queue/sq?consumerGroup=g&subscriptionMode=%c3', 'subscriptionMode', 'invalid UTF-8 mode' ],
	[ '/api/v1/pop/queue/sq?consumerGroup=g&subscriptionFrom=notadate', 'subscriptionFrom', 'a date that does not parse' ],
	[ '/api/v1/pop/queue/sq?consumerGroup=g&subscriptionFrom=2026%00', 'subscriptionFrom', 'NUL in a date' ],
	[ '/api/v1/consumer-groups/g%00x', 'group', 'NUL in a path parameter of another route' ],
	[ '/api/v1/resources/queues/%fe', 'queue', 'invalid UTF-8 in another route' ],
	[ '/api/v1/dlq?queue=a%00b', 'queue', 'NUL in a query value of a SQL route' ],
	[ '/api/v1/dlq?consumerGroup=%ff', 'consumerGroup', 'invalid UTF-8 in a query value of a SQL route' ]);
for my $b (@bad)
{
	my ($path, $field, $what) = @$b;
	my ($st, $doc) = http_json($node, 'GET', $path);
	is($st, 400, "$what: 400");
	like($doc->{error} // '', qr/^\Q$field\E /, "$what: the error names $field") or diag explain $doc;
}

# Nothing of it reached the tables; the cluster still dumps cleanly.
is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.consumer_groups_metadata'), '0', 'no subscription stored');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queen.log_consumers}), '0', 'no cursor stored');
is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.queues'), '1', 'no queue made');

# Valid text still goes through, escapes and all.
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/sq?consumerGroup=caf%C3%A9&batch=1&autoAck=true');
is($st, 200, 'a UTF-8 group pops');
is($doc->{consumerGroup}, "caf\xc3\xa9", 'under its decoded name (UTF-8 bytes)');
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/sq?consumerGroup=g2&batch=1&subscriptionFrom=2020-01-01T00:00:00Z');
is($st, 200, 'a timestamp subscription pops');
$node->command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', "$PostgreSQL::Test::Utils::tmp_check/h.sql" ],
	'the database dumps');

# ---- a corrupt segment fences its partition only
($st) = http_json($node, 'POST', '/api/v1/push',
	{ items => [ { queue => 'cq', partition => 'bad', payload => 1 }, { queue => 'cq', partition => 'good', payload => 2 } ] });
is($st, 201, 'push to two partitions');
$node->safe_psql('postgres', q{UPDATE queen.log_segments s SET blob = '\x00'::bytea
	FROM queen.log_partitions p WHERE p.id = s.partition_id AND p.name = 'bad'});
for my $i (1 .. 2)
{
	($st, $doc) = http_json($node, 'GET', "/api/v1/pop/queue/cq?consumerGroup=w$i&partitions=5&batch=10");
	is($st, 200, "wildcard pop $i answers 200");
	is(join(',', map { $_->{partition} } @{ $doc->{messages} }), 'good', "wildcard pop $i serves the healthy partition");
}
($st, $doc) = http_json($node, 'GET', '/api/v1/pop/queue/cq/partition/bad');
is($st, 500, 'a pop naming the damaged partition answers 500');
like($doc->{error}, qr/corrupt data/, 'saying the data is corrupt (the detail goes to the log)');
like(slurp_file($node->logfile), qr/corrupt log segment in partition [0-9a-f-]{36} at base offset 0/, 'the log names partition and offset');
my (undef, $metrics) = http($node, 'GET', '/metrics');
like($metrics, qr/^queen_streams_corrupt_segment_skips_total 2$/m, '/metrics counts the skips');
my $log = slurp_file($node->logfile);
my @lines = ($log =~ /(wildcard pops of queue "cq" skip partition [0-9a-f-]{36}: corrupt log segment at base offset 0)/g);
is(scalar @lines, 1, 'logged once for two skips');

$node->stop;
done_testing();
